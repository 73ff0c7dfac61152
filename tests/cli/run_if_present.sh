#!/bin/sh
# run_if_present.sh FILE COMMAND...: runs COMMAND if FILE exists, else reports a skip (exit 77,
# the SKIP_RETURN_CODE of the CLI tests that need the shared test models).
# Under VELLUM_REQUIRE_MODELS=1 (CI) a missing file fails the test instead (exit 1).
if [ ! -f "$1" ]; then
  if [ "${VELLUM_REQUIRE_MODELS:-}" = 1 ]; then
    echo "VELLUM_REQUIRE_MODELS=1: $1 is missing (the shared test models are not installed)" >&2
    exit 1
  fi
  echo "skipped: $1 is missing (the shared test models are not installed)"
  exit 77
fi
shift
exec "$@"
