#!/bin/bash
# Speculative decoding, one stream (issue 36): decode tok/s of `vellum bench throughput` with one
# request, without speculation and with the n-gram and suffix proposers, REPS runs each
# interleaved, medians printed. Usage: one_stream.sh VELLUM MODEL PROMPT_FILE [OUTPUT_LEN] [REPS]
# (PROMPT_FILE: repeat.txt for the repetition task, chat_*.txt for open-ended chat). Runs through
# ../shared/bench/own-autogroup.sh when it is there.
set -euo pipefail
vellum=$1 model=$2 prompt=$3 output_len=${4:-256} reps=${5:-3}
wrap=()
[[ -x ../shared/bench/own-autogroup.sh ]] && wrap=(../shared/bench/own-autogroup.sh)
[[ -x /work/shared/bench/own-autogroup.sh ]] && wrap=(/work/shared/bench/own-autogroup.sh)
declare -A configs=(
  [none]=""
  [ngram]='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}'
  [suffix]='{"method": "suffix"}'
)
declare -A rates accept
for ((r = 0; r < reps; ++r)); do
  for name in none ngram suffix; do
    args=(bench throughput --model "$model" --prompt-file "$prompt" --num-prompts 1
          --output-len "$output_len" --temperature 0 --threads 2 --max-model-len 2048)
    [[ -n ${configs[$name]} ]] && args+=(--speculative-config "${configs[$name]}")
    out=$("${wrap[@]}" "$vellum" "${args[@]}" 2>/dev/null)
    rates[$name]+="$(sed -n 's/^Decode: \([0-9.]*\).*/\1/p' <<<"$out") "
    accept[$name]="$(sed -n 's/.*draft acceptance rate \([0-9.]*%\), mean acceptance length \([0-9.]*\).*/\1 accepted, mean length \2/p' <<<"$out")"
  done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median <<<"${rates[none]}")
for name in none ngram suffix; do
  m=$(median <<<"${rates[$name]}")
  printf '%-7s decode %7.1f tok/s (runs: %s) = %.2fx  %s\n' "$name" "$m" "${rates[$name]% }" \
    "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" "${accept[$name]:-}"
done
