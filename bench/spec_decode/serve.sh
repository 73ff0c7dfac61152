#!/bin/bash
# Speculative decoding under load (issue 36): `vellum bench serve` at concurrency 1, 4 and 16
# (random 128-token prompts, 128 output tokens with --ignore-eos, 4 x concurrency prompts, all
# at once) against one `vellum serve` per configuration: without speculation, n-gram and suffix
# (default gate). Prints output throughput and median TPOT per configuration and concurrency.
# Usage: serve.sh VELLUM MODEL VOCAB_SIZE [PORT]
set -euo pipefail
vellum=$1 model=$2 vocab=$3 port=${4:-8391}
wrap=()
[[ -x /work/shared/bench/own-autogroup.sh ]] && wrap=(/work/shared/bench/own-autogroup.sh)
declare -A configs=(
  [none]=""
  [ngram]='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}'
  [suffix]='{"method": "suffix"}'
)
for name in none ngram suffix; do
  log=$(mktemp)
  args=(serve "$model" --port "$port" --threads 2 --max-model-len 1024 --max-num-seqs 16)
  [[ -n ${configs[$name]} ]] && args+=(--speculative-config "${configs[$name]}")
  "${wrap[@]}" "$vellum" "${args[@]}" >"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 120); do
    curl -sf "localhost:$port/health" >/dev/null && break
    kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
    sleep 1
  done
  for c in 1 4 16; do
    out=$("${wrap[@]}" "$vellum" bench serve --port "$port" --random-input-len 128 \
      --random-output-len 128 --num-prompts $((4 * c)) --max-concurrency "$c" --request-rate inf \
      --ignore-eos --vocab-size "$vocab" --seed 1 2>&1)
    printf '%-7s concurrency %2d: %s tok/s output, median TPOT %s ms\n' "$name" "$c" \
      "$(sed -n 's/^Output token throughput (tok\/s): *//p' <<<"$out")" \
      "$(sed -n 's/^Median TPOT (ms): *//p' <<<"$out")"
  done
  [[ -n ${configs[$name]} ]] && { curl -s "localhost:$port/metrics" | grep -E '^vellum:spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total' | sed 's/{[^}]*}//' || true; }
  kill $server; wait $server 2>/dev/null || true
  rm -f "$log"
done
