#!/usr/bin/env bash
# Runs one black-box test file of `vellum serve` with Node's test runner. Exits 77 (CTest: skipped)
# with the reason when Node or the openai package is missing; scripts/setup.sh installs the
# package with `npm ci` from package-lock.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (install Node.js >= 18 and run scripts/setup.sh)"
  exit 77
fi
if [ ! -d "$here/node_modules/openai" ]; then
  echo "SKIP: the openai npm package is missing; run: npm ci --prefix tests/server/js"
  exit 77
fi
exec node --test-reporter=spec "$here/$1"
