#!/usr/bin/env bash
# Issue 14's serving table: `vellum bench serve` against `vellum serve` at concurrency 1, 8, 32
# and 64, random 128-token prompts and 128 output tokens, all requests at once (--request-rate
# inf), 2 x concurrency prompts (4 at concurrency 1), one server for the whole table.
#
#   bench/serve_table.sh [VELLUM_BINARY] [MODEL] [PORT]
#   env: CONCURRENCY="1 8 32 64", SERVE_ARGS="--max-num-seqs 64" (extra `vellum serve` flags)
#
# Run it through ../shared/bench/own-autogroup.sh (server and client in one group) on a quiet
# machine. Prints, per concurrency, bench serve's throughput and median TTFT / TPOT lines.
set -euo pipefail
cd "$(dirname "$0")/.."
vellum=${1:-build/release/src/cli/vellum}
model=${2:-/tmp/vellum-1b/llama-3.2-1b-q8_0.gguf}
port=${3:-8377}
log=$(mktemp)
# shellcheck disable=SC2086
"$vellum" serve "$model" --port "$port" ${SERVE_ARGS:---max-num-seqs 64} >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 300); do
  curl -sf "localhost:$port/health" >/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
  sleep 1
done
for c in ${CONCURRENCY:-1 8 32 64}; do
  n=$((c * 2)); [ "$c" -eq 1 ] && n=4
  echo "=== concurrency $c, $n prompts"
  "$vellum" bench serve --port "$port" --random-input-len 128 --random-output-len 128 \
    --num-prompts "$n" --max-concurrency "$c" --request-rate inf --seed 1 2>&1 |
    grep -E "Successful|Benchmark duration|Output token throughput|Total Token|Median TTFT|Median TPOT"
done
