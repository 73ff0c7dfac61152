#!/usr/bin/env bash
# Tensor parallelism on one host: TP=2 ranks x 1 thread against TP=1 x 2 threads, on the same
# cores, for decode (batch 1), prefill and batched decode; plus the all-reduce time per step.
#
#   bench/parallel_scaling.sh MODEL.gguf [REPEATS]      (default: /tmp/vellum-1b/1b-q8_0.gguf, 3)
#
# Each configuration runs REPEATS times, interleaved, through ../shared/bench/own-autogroup.sh when
# present; the medians are printed. Shared machines are noisy: compare the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-/tmp/vellum-1b/1b-q8_0.gguf}
repeats=${2:-3}
vellum=${VELLUM:-build/ci/src/cli/vellum}
wrap=()
[ -x ../shared/bench/own-autogroup.sh ] && wrap=(../shared/bench/own-autogroup.sh)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
common=(--kv-cache-memory 1GiB --num-iters-warmup 1 --num-iters 2)
shapes=("decode:--input-len 16 --output-len 33 --batch-size 1"
        "prefill:--input-len 512 --output-len 2 --batch-size 1"
        "batched:--input-len 64 --output-len 17 --batch-size 16")
for ((r = 0; r < repeats; r++)); do
  for shape in "${shapes[@]}"; do
    name=${shape%%:*}
    # shellcheck disable=SC2206
    args=(${shape#*:})
    "${wrap[@]}" "$vellum" bench latency --model "$model" "${args[@]}" "${common[@]}" --threads 2 \
      --output-json "$out/$name-tp1-$r.json" >/dev/null
    "${wrap[@]}" mpirun -np 2 --bind-to core "$vellum" bench latency --model "$model" "${args[@]}" \
      "${common[@]}" --threads 1 --tensor-parallel-size 2 --output-json "$out/$name-tp2-$r.json" \
      >/dev/null
  done
done
python3 - "$out" "$repeats" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def med(name, key):
    return statistics.median(json.load(open(f"{out}/{name}-{r}.json"))[key] for r in range(repeats))
print(f"{'shape':8} {'metric':18} {'TP=1 x 2 threads':>17} {'TP=2 x 1 thread':>16} {'ratio':>6}")
for shape, key in [("decode", "decode_tokens_per_s"), ("prefill", "prefill_tokens_per_s"),
                   ("batched", "decode_tokens_per_s")]:
    a, b = med(f"{shape}-tp1", key), med(f"{shape}-tp2", key)
    print(f"{shape:8} {key:18} {a:17.2f} {b:16.2f} {b / a:6.2f}")
for shape in ["decode", "batched"]:
    ar = med(f"{shape}-tp2", "all_reduce_seconds_per_decode_step") * 1e6
    sync = med(f"{shape}-tp2", "synchronised_all_reduce_seconds_per_decode_step") * 1e6
    step = 1e6 / med(f"{shape}-tp2", "decode_tokens_per_s") * (16 if shape == "batched" else 1)
    print(f"{shape}: TP=2 decode step {step:.0f} us; in all-reduces {ar:.0f} us (waiting for the "
          f"other rank included), of which the transfer (ranks synchronised) {sync:.0f} us")
PY
echo "raw results: $out"
