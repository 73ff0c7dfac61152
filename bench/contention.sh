#!/usr/bin/env bash
# Throughput when another process holds a core: `vellum bench throughput` with 2 threads, alone
# and beside a busy loop pinned to one core (taskset), interleaved REPEATS times; prints the
# medians and their ratio. Fair degradation on 2 cores is about 1.5x (one thread keeps a core,
# the other gets half of one); a spinning barrier that waits for the descheduled thread makes it
# far worse.
#
#   bench/contention.sh [MODEL (default: $VELLUM_MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf)]
#                       [REPEATS (default 3)]
# Env: VELLUM (build/ci/src/cli/vellum), HOG_CPU (1), EXTRA_ENV (e.g. "OMP_WAIT_POLICY=active"
#      to compare waiting policies), BENCH_ARGS (the workload, see below).
#
# Each run goes through ../shared/bench/own-autogroup.sh when present, with the busy loop
# started inside the same session, so that it competes with the benchmark as an ordinary
# process would (a hog in another autogroup would be outweighed by the benchmark's nice -20).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${VELLUM_MODELS_DIR:-build/models/real}
model=${1:-$models/SmolLM2-135M-Instruct.Q4_1.gguf}
repeats=${2:-3}
vellum=${VELLUM:-build/ci/src/cli/vellum}
hog_cpu=${HOG_CPU:-1}
bench_args=${BENCH_ARGS:---input-len 128 --output-len 64 --num-prompts 32 --threads 2}
wrap=()
[ -x ../shared/bench/own-autogroup.sh ] && wrap=(../shared/bench/own-autogroup.sh)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One run: `hog` 0 or 1, result in $out/$name-$r.json.
run() {
  local hog=$1 name=$2 r=$3
  # shellcheck disable=SC2086
  "${wrap[@]}" env ${EXTRA_ENV:-} bash -c '
    hog=$1; cpu=$2; shift 2
    if [ "$hog" = 1 ]; then taskset -c "$cpu" bash -c "while :; do :; done" & pid=$!; fi
    "$@" >/dev/null 2>&1; rc=$?
    if [ "$hog" = 1 ]; then kill "$pid"; wait "$pid" 2>/dev/null; fi
    exit $rc' contention "$hog" "$hog_cpu" \
    "$vellum" bench throughput --model "$model" $bench_args --output-json "$out/$name-$r.json"
}

for ((r = 0; r < repeats; r++)); do
  run 0 alone "$r"
  run 1 hog "$r"
done
python3 - "$out" "$repeats" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def figures(name):
    return [json.load(open(f"{out}/{name}-{r}.json"))["tokens_per_second"] for r in range(repeats)]
alone, hog = figures("alone"), figures("hog")
print("tokens/s alone:      " + ", ".join(f"{x:.1f}" for x in alone) + f"  median {statistics.median(alone):.1f}")
print("tokens/s beside hog: " + ", ".join(f"{x:.1f}" for x in hog) + f"  median {statistics.median(hog):.1f}")
print(f"slowdown (median alone / median beside hog): {statistics.median(alone) / statistics.median(hog):.2f}x")
PY
