#!/usr/bin/env bash
# JSONSchemaBench (github guidance-ai/jsonschemabench) for Vellum's structured outputs. Fetches
# nothing: it takes a checkout of the benchmark (README "Structured outputs: JSONSchemaBench" says
# how to get one) and a build of this repository, and prints markdown tables:
#   accept    per subset of data/: schemas accepted by `vellum serve`'s compiler (its defaults),
#             compile time p50 / p99 / max (build/.../schema_bench accept);
#   maskbench maskbench/data driven token by token through the matcher at the Llama 3 vocabulary:
#             wrong accepts / rejects, compile and per-token mask time (schema_bench maskbench);
#   coverage  a real model behind `vellum serve`, temperature 0, a fixed token budget, a sample
#             of each subset; outputs validated with Python's `jsonschema`
#             (bench/jsonschemabench_coverage.py).
#
#   bench/jsonschemabench.sh JSB_CHECKOUT BUILD_DIR [MODEL.gguf]
#     BUILD_DIR: a build of this repository with the targets schema_bench and vellum
#     MODEL default: ${VELLUM_MODELS_DIR:-build/models/real}/SmolLM2-135M-Instruct.Q4_1.gguf
#   env: STAGES="accept maskbench coverage"  MASKBENCH_EVERY=10 (every Nth MaskBench file)
#        VOCAB (Llama 3 vocabulary GGUF; default ../shared/models/vocab/ggml-vocab-llama-bpe.gguf)
#        PYTHON (with jsonschema installed; default python3)  PER_SUBSET=10  MAX_TOKENS=512
#        PORT=8391  THREADS=2  OWN_AUTOGROUP (default: shared/bench/own-autogroup.sh; "none")
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
self="$repo/bench/$(basename "$0")"

if [ -z "${JSB_IN_AUTOGROUP:-}" ]; then
  ag=${OWN_AUTOGROUP:-}
  if [ -z "$ag" ]; then
    for cand in "$repo/../shared/bench/own-autogroup.sh" /work/shared/bench/own-autogroup.sh; do
      [ -x "$cand" ] && { ag=$cand; break; }
    done
  fi
  if [ -n "$ag" ] && [ "$ag" != none ]; then JSB_IN_AUTOGROUP=1 exec "$ag" "$self" "$@"; fi
fi

[ $# -ge 2 ] || { sed -n '2,21p' "$self" >&2; exit 2; }
jsb=$(realpath "$1"); build=$(realpath "$2")
model=${3:-${VELLUM_MODELS_DIR:-$repo/build/models/real}/SmolLM2-135M-Instruct.Q4_1.gguf}
stages=${STAGES:-accept maskbench coverage}
vocab=${VOCAB:-$repo/../shared/models/vocab/ggml-vocab-llama-bpe.gguf}
python=${PYTHON:-python3}
schema_bench=$build/bench/structured/schema_bench
vellum=$build/src/cli/vellum
for d in "$jsb/data" "$jsb/maskbench/data"; do
  [ -d "$d" ] || { echo "$d not found: JSB_CHECKOUT must be a checkout of guidance-ai/jsonschemabench" >&2; exit 2; }
done
[ -x "$schema_bench" ] || { echo "not built: $schema_bench (cmake --build $build --target schema_bench)" >&2; exit 2; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; benchmark commit: $(git -C "$jsb" rev-parse --short HEAD 2>/dev/null || echo unknown)"

if [[ " $stages " == *" accept "* ]]; then
  echo; echo "## Accepted schemas (vellum serve defaults) and compile time"
  "$schema_bench" accept "$jsb/data"
fi

if [[ " $stages " == *" maskbench "* ]]; then
  [ -f "$vocab" ] || { echo "no vocabulary $vocab (set VOCAB)" >&2; exit 2; }
  echo; echo "## MaskBench (every ${MASKBENCH_EVERY:-10}th file, Llama 3 vocabulary, JSON Schema defaults)"
  "$schema_bench" maskbench "$jsb/maskbench/data" "$vocab" --every "${MASKBENCH_EVERY:-10}"
fi

if [[ " $stages " == *" coverage "* ]]; then
  [ -x "$vellum" ] || { echo "not built: $vellum" >&2; exit 2; }
  [ -f "$model" ] || { echo "no model file $model" >&2; exit 2; }
  "$python" -c "import jsonschema" 2>/dev/null || { echo "$python lacks jsonschema (pip install jsonschema==4.26.0 in a venv; set PYTHON)" >&2; exit 2; }
  port=${PORT:-8391}
  log=$(mktemp)
  "$vellum" serve "$model" --served-model-name model --host 127.0.0.1 --port "$port" \
    --threads "${THREADS:-2}" >"$log" 2>&1 &
  server_pid=$!
  trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do
    curl -sf "127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { echo "server died:" >&2; tail -20 "$log" >&2; exit 1; }
    sleep 1
  done
  echo; echo "## Empirical coverage: $(basename "$model"), temperature 0, ${MAX_TOKENS:-512} tokens, ${PER_SUBSET:-10} schemas per subset"
  "$python" "$repo/bench/jsonschemabench_coverage.py" "$jsb/data" --url "http://127.0.0.1:$port" \
    --model model --per-subset "${PER_SUBSET:-10}" --max-tokens "${MAX_TOKENS:-512}"
fi
