#!/bin/bash
# The batch size past which verifying drafts costs more than it saves (issue 36's gate): output
# tok/s of `vellum bench throughput` with B identical-prompt greedy requests, without speculation
# and with n-gram drafts forced on ("gate": "always"), for B in SIZES; REPS interleaved runs each,
# medians. Usage: gate_crossover.sh VELLUM MODEL PROMPT_FILE [OUTPUT_LEN] [REPS] [SIZES...]
set -euo pipefail
vellum=$1 model=$2 prompt=$3 output_len=${4:-128} reps=${5:-2}
shift $(( $# < 5 ? $# : 5 ))
sizes=("$@")
[[ ${#sizes[@]} -eq 0 ]] && sizes=(1 2 4 8 16)
wrap=()
[[ -x /work/shared/bench/own-autogroup.sh ]] && wrap=(/work/shared/bench/own-autogroup.sh)
spec='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5, "gate": "always"}'
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for b in "${sizes[@]}"; do
  plain="" forced="" accept=""
  for ((r = 0; r < reps; ++r)); do
    args=(bench throughput --model "$model" --prompt-file "$prompt" --num-prompts "$b"
          --output-len "$output_len" --temperature 0 --threads 2 --max-model-len 2048)
    out=$("${wrap[@]}" "$vellum" "${args[@]}" 2>/dev/null)
    plain+="$(sed -n 's/.*, \([0-9.]*\) output tokens\/s$/\1/p' <<<"$out") "
    out=$("${wrap[@]}" "$vellum" "${args[@]}" --speculative-config "$spec" 2>/dev/null)
    forced+="$(sed -n 's/.*, \([0-9.]*\) output tokens\/s$/\1/p' <<<"$out") "
    accept="$(sed -n 's/.*draft acceptance rate \([0-9.]*%\), mean acceptance length \([0-9.]*\).*/\1 accepted, mean length \2/p' <<<"$out")"
  done
  p=$(median <<<"$plain") f=$(median <<<"$forced")
  printf 'batch %3d: %8.1f tok/s without, %8.1f with drafts = %.2fx  (%s)\n' "$b" "$p" "$f" \
    "$(awk -v a="$f" -v b="$p" 'BEGIN {print a / b}')" "$accept"
done
