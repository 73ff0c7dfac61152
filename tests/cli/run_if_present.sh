#!/bin/sh
# run_if_present.sh FILE COMMAND...: runs COMMAND if FILE exists, else reports a skip (exit 77,
# the SKIP_RETURN_CODE of the CLI tests that need the shared test models).
if [ ! -f "$1" ]; then
  echo "skipped: $1 is missing (the shared test models are not installed)"
  exit 77
fi
shift
exec "$@"
