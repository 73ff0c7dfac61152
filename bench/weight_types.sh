#!/usr/bin/env bash
# Prefill, decode and batched throughput of a 1B Llama-3.2-shaped model in each weight type,
# with the kernels of each ISA level (issue: every GGUF weight type at the machine's limits).
#
#   bench/weight_types.sh [VELLUM_BINARY] [TYPES...]
#   env: ISAS="avx512_bf16 avx2" (VELLUM_ISA levels), MODELS=/tmp/vellum-1b (model cache),
#        VOCAB=../shared/models/vocab/ggml-vocab-llama-bpe.gguf, BATCHED=1 (also 32 x 128/128),
#        SHAPE=llama-3.2-1b (any make-model shape: qwen2.5-0.5b, gemma-3-1b, moe-8x-top2, ...)
#
# Run it through ../shared/bench/own-autogroup.sh on a quiet machine. Each line: type, ISA,
# prefill-512 tok/s, decode tok/s with the share of the read bandwidth measured in the same run,
# and (BATCHED=1) the output tok/s of 32 requests of 128 in / 128 out end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
vellum=${1:-build/release/src/cli/vellum}
shift || true
types=("$@")
if [ ${#types[@]} -eq 0 ]; then
  types=(bf16 q8_0 q4_k_m q4_0 q4_1 q5_0 q5_1 q5_k_m q6_k q3_k_m q2_k iq4_nl iq4_xs)
fi
isas=${ISAS:-"avx512_bf16 avx2"}
models=${MODELS:-/tmp/vellum-1b}
vocab=${VOCAB:-../shared/models/vocab/ggml-vocab-llama-bpe.gguf}
shape=${SHAPE:-llama-3.2-1b}
mkdir -p "$models"

for type in "${types[@]}"; do
  model="$models/$shape-$type.gguf"
  if [ ! -f "$model" ]; then
    "$vellum" make-model --shape "$shape" --dtype "$type" --vocab-from "$vocab" \
      --output "$model" >/dev/null
  fi
  for isa in $isas; do
    out=$(VELLUM_ISA=$isa "$vellum" bench latency --model "$model" --input-len 512 \
      --output-len 64 --num-iters-warmup 1 --num-iters 3 --max-model-len 1024 \
      --kv-cache-memory 1GiB 2>&1)
    prefill=$(echo "$out" | sed -n 's/^Prefill: .* = \([0-9.]*\) tokens\/s.*/\1/p' | head -1)
    decode=$(echo "$out" | sed -n 's/^Decode: .* = \([0-9.]*\) tokens\/s.*/\1/p' | head -1)
    share=$(echo "$out" | sed -n 's/.* = \([0-9]*\)% of the \([0-9.]*\) GB\/s.*/\1% of \2 GB\/s/p' | head -1)
    line="$shape $type $isa prefill-512 ${prefill:-?} tok/s, decode ${decode:-?} tok/s (${share:-?})"
    if [ "${BATCHED:-1}" = 1 ]; then
      tput=$(VELLUM_ISA=$isa "$vellum" bench throughput --model "$model" --input-len 128 \
        --output-len 128 --num-prompts 32 --max-model-len 1024 --kv-cache-memory 2GiB 2>&1 |
        sed -n 's/^Throughput: .*, \([0-9.]*\) output tokens\/s.*/\1/p' | head -1)
      line="$line, batched 32x128/128 ${tput:-?} output tok/s"
    fi
    echo "$line"
    echo "$out" | grep '^Mixture of experts' || true
    [ -n "${prefill:-}" ] || echo "$out" | tail -5 >&2
  done
done
