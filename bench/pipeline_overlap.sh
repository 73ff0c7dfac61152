#!/usr/bin/env bash
# Pipeline parallelism on one host: PP=2 ranks x 1 thread against one process with 2 threads, on
# batched generation (bench throughput, which runs the engine, so the two stages overlap: rank 0
# schedules and runs step N+1 while rank 1 runs step N). VELLUM_BASE=<binary> adds the same PP run
# with another build (e.g. one from before the overlap) to compare against.
#
#   bench/pipeline_overlap.sh MODEL.gguf [REPEATS]     (default: /tmp/vellum-1b/llama-3.2-1b-q8_0.gguf, 3)
#
# Each configuration runs REPEATS times, interleaved, through ../shared/bench/own-autogroup.sh
# when present; medians are printed. Shared machines are noisy: compare the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-/tmp/vellum-1b/llama-3.2-1b-q8_0.gguf}
repeats=${2:-3}
vellum=${VELLUM:-build/release/src/cli/vellum}
base=${VELLUM_BASE:-}
wrap=()
[ -x ../shared/bench/own-autogroup.sh ] && wrap=(../shared/bench/own-autogroup.sh)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
args=(bench throughput --model "$model" --input-len 128 --output-len 128 --num-prompts 32
  --max-model-len 1024 --kv-cache-memory 2GiB)
configs=(single pp2)
[ -n "$base" ] && configs+=(pp2-base)
for ((r = 0; r < repeats; r++)); do
  for c in "${configs[@]}"; do
    case $c in
      single) "${wrap[@]}" "$vellum" "${args[@]}" --threads 2 --output-json "$out/$c-$r.json" \
                >"$out/$c-$r.txt" ;;
      pp2) "${wrap[@]}" mpirun -np 2 --bind-to core "$vellum" "${args[@]}" --threads 1 \
             --pipeline-parallel-size 2 --output-json "$out/$c-$r.json" >"$out/$c-$r.txt" ;;
      pp2-base) "${wrap[@]}" mpirun -np 2 --bind-to core "$base" "${args[@]}" --threads 1 \
                  --pipeline-parallel-size 2 --output-json "$out/$c-$r.json" >"$out/$c-$r.txt" ;;
    esac
    echo "$c round $r: $(grep -h '^Throughput' "$out/$c-$r.txt")"
    grep -h '^Pipeline' "$out/$c-$r.txt" || true
  done
done
python3 - "$out" "$repeats" "${configs[@]}" <<'PY'
import json, statistics, sys
out, repeats, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = {c: statistics.median(json.load(open(f"{out}/{c}-{r}.json"))["output_tokens_per_second"]
                            for r in range(repeats)) for c in configs}
names = {"single": "1 process x 2 threads", "pp2": "PP=2 x 1 thread",
         "pp2-base": "PP=2 x 1 thread (VELLUM_BASE)"}
for c in configs:
    print(f"{names[c]:32} {med[c]:8.1f} output tok/s  ({med[c] / med['single']:.2f} of one process)")
PY
echo "raw results: $out"
