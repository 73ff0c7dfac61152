#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the `vellum` program, makes a small
# llama model with seeded random weights (the default model; no download), starts the
# OpenAI-compatible server on it and sends it a completion and a streamed completion with curl.
# The server keeps running until Ctrl-C (or stops after the examples with --once).
#
#   scripts/run-default.sh [--once] [MODEL.gguf]       port: $VELLUM_PORT (default 8000)
set -euo pipefail
cd "$(dirname "$0")/.."

once=0
if [ "${1:-}" = "--once" ]; then
  once=1
  shift
fi

scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DVELLUM_BUILD_TESTS=OFF \
  -DVELLUM_BUILD_BENCH=OFF
cmake --build build/release -j "$(nproc)" --target vellum
vellum=build/release/src/cli/vellum

model="${1:-build/models/tiny-f32.gguf}"
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$vellum" make-model --shape tiny --dtype f32 --seed 0 --output "$model"
fi

port="${VELLUM_PORT:-8000}"
base="http://127.0.0.1:$port"
"$vellum" serve "$model" --host 127.0.0.1 --port "$port" --kv-cache-memory 256MiB &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT

for _ in $(seq 1200); do
  if curl -sf "$base/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server" 2>/dev/null; then
    echo "run-default: vellum serve exited before it was ready" >&2
    exit 1
  fi
  sleep 0.1
done

show() {
  echo
  echo "\$ $*"
  "$@"
  echo
}
show curl -s "$base/v1/models"
show curl -s "$base/v1/completions" -H "Content-Type: application/json" \
  -d '{"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}'
show curl -sN "$base/v1/completions" -H "Content-Type: application/json" \
  -d '{"prompt": "The little dog", "max_tokens": 8, "temperature": 0, "stream": true,
       "stream_options": {"include_usage": true}}'

if [ "$once" -eq 1 ]; then exit 0; fi
echo "vellum serve is running on $base with $model (Ctrl-C stops it)."
trap - EXIT
trap 'kill -TERM $server 2>/dev/null || true' INT TERM
wait "$server" || true
wait "$server" 2>/dev/null || true
