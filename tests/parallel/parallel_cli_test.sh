#!/usr/bin/env bash
# Tensor / pipeline parallelism end to end: runs `vellum` under mpirun with 2 ranks over shared
# memory and compares with the single-process run.
#
#   parallel_cli_test.sh VELLUM MODELS_DIR CASE
#
# Exit 77 (skip) when mpirun or the shared test models are missing (models: exit 1 under
# VELLUM_REQUIRE_MODELS=1). Open MPI refuses to run as
# root without OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), and 2 ranks with 2 threads each oversubscribe a
# 2-core machine: both are set here, as the README tells users to.
set -uo pipefail
vellum=$1
models=$2
case_name=$3
model=$models/stories260K.gguf
arch=$models/arch

if ! command -v mpirun >/dev/null 2>&1; then
  echo "skipped: mpirun is missing (scripts/setup.sh installs openmpi-bin)"
  exit 77
fi
# A missing model skips (exit 77), or fails under VELLUM_REQUIRE_MODELS=1 (CI).
skip_for_missing_model() {
  if [ "${VELLUM_REQUIRE_MODELS:-}" = 1 ]; then
    echo "VELLUM_REQUIRE_MODELS=1: $1 is missing" >&2
    exit 1
  fi
  echo "skipped: $1 is missing (the shared test models are not installed)"
  exit 77
}
if [ "$case_name" != tp2_generated_model ] && [ ! -f "$model" ]; then
  skip_for_missing_model "$model"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Quiet Open MPI's notices about unused network interfaces in containers.
export OMPI_MCA_btl_base_warn_component_unused=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun --oversubscribe --bind-to none -np 2)
common=(--kv-cache-dtype f32 --kv-cache-memory 64MiB --threads 1)

fail() {
  echo "FAIL: $*"
  exit 1
}

# Token ids of every output, one JSON array per line, from generate --json / --output.
ids() { grep -o '"token_ids":\[[0-9,]*\]' "$1"; }

# generate with $@ on one process and on two ranks with $PARALLEL; the token ids must be equal.
compare_generate() {
  local parallel=$1
  shift
  "$vellum" generate "$@" "${common[@]}" >"$tmp/single.json" 2>"$tmp/single.err" ||
    fail "single-process run failed: $(cat "$tmp/single.err")"
  # shellcheck disable=SC2086
  "${mpi[@]}" "$vellum" generate "$@" "${common[@]}" $parallel >"$tmp/parallel.json" \
    2>"$tmp/parallel.err" || fail "run with $parallel failed: $(cat "$tmp/parallel.err")"
  ids "$tmp/single.json" >"$tmp/single.ids"
  ids "$tmp/parallel.json" >"$tmp/parallel.ids"
  [ -s "$tmp/single.ids" ] || fail "no output tokens: $(cat "$tmp/single.json")"
  if ! cmp -s "$tmp/single.ids" "$tmp/parallel.ids"; then
    diff "$tmp/single.ids" "$tmp/parallel.ids"
    fail "$parallel generated other tokens than one process"
  fi
  echo "ok: $parallel equals one process ($(wc -l <"$tmp/single.ids") outputs)"
}

prompts=(--prompt "Once upon a time" --prompt "The little dog" --prompt "Lily and Ben went to the park"
  --prompt "One day")

# A run that lasts minutes, to be cut short.
long_run=(bench throughput --model "$model" --input-len 64 --output-len 400 --num-prompts 20000
  "${common[@]}")

# The rank with OMPI_COMM_WORLD_RANK=$2 among the children of mpirun pid $1.
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}

# Waits until both ranks of a `--log-level info` run logging to $1 are past start-up (their
# "KV cache:" lines), at most 60 s, then a second more: a fresh machine may take longer than a
# fixed sleep to start mpirun's ranks.
wait_started() {
  local i
  for ((i = 0; i < 600; i++)); do
    [ "$(grep -c 'KV cache:' "$1")" -ge 2 ] && break
    sleep 0.1
  done
  [ "$(grep -c 'KV cache:' "$1")" -ge 2 ] || fail "the ranks did not start: $(cat "$1")"
  sleep 1
}

# SIGSTOPs rank $2 of the mpirun job $1 (--distributed-timeout 3, output in $tmp/out): the job
# must end within 30 s, non-zero, with an error naming the silent rank.
stop_rank_expect_end() {
  local victim
  victim=$(rank_pid "$1" "$2")
  [ -n "$victim" ] || fail "rank $2 not found among mpirun's children"
  kill -STOP "$victim"
  wait_gone "$1" 30 "the job did not end within 30 s after rank $2 stopped answering"
  kill -9 "$victim" 2>/dev/null
  wait "$1" && fail "the job exited 0 after rank $2 stopped answering"
  cat "$tmp/out"
  grep -q "rank $2 did not answer within 3 s" "$tmp/out" ||
    fail "the error does not name the silent rank $2"
}

# Waits until process $1 is gone, at most $2 seconds; fails with $3 otherwise.
wait_gone() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null
  fail "$3"
}

# Starts `vellum serve` on 2 ranks with $@ (output in $tmp/serve.out); sets job and port once
# /health answers 200.
start_server() {
  "${mpi[@]}" "$vellum" serve "$model" --port 0 --distributed-timeout 3 "${common[@]}" "$@" \
    >"$tmp/serve.out" 2>&1 &
  job=$!
  port=""
  local i
  for ((i = 0; i < 300; i++)); do
    port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$tmp/serve.out" | grep -o '[0-9]*$')
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || {
    kill "$job"
    fail "the server did not become healthy: $(cat "$tmp/serve.out")"
  }
}

# A greedy completion from the server on $port equals one process's.
expect_served_completion() {
  local body='{"model": "'$model'", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}'
  curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "$body" >"$tmp/completion.json" || fail "completion failed"
  "$vellum" generate --model "$model" --prompt "Once upon a time" --max-tokens 24 \
    --temperature 0 --json "${common[@]}" >"$tmp/single.json"
  local want
  want=$(grep -o '"text":"[^"]*"' "$tmp/single.json" | tail -1)
  grep -qF "$want" "$tmp/completion.json" ||
    fail "the served text differs: $(cat "$tmp/completion.json") vs $want"
  echo "ok: served completion equals one process"
}

case $case_name in
  tp2_greedy)
    compare_generate "--tensor-parallel-size 2" --model "$model" "${prompts[@]}" --max-tokens 48 \
      --temperature 0 --ignore-eos --json
    ;;
  pp2_greedy)
    compare_generate "--pipeline-parallel-size 2" --model "$model" "${prompts[@]}" \
      --max-tokens 48 --temperature 0 --ignore-eos --json
    ;;
  pp2_overlap)
    # Two pipeline stages keep two steps in flight (rank 0 schedules and runs the next step while
    # rank 1 runs the previous one): still the same tokens as one process, with 8 requests spread
    # over the steps, prompts cut into chunks, n > 1 with a seed, and preemption.
    many=("${prompts[@]}" --prompt "A big red ball" --prompt "Tom had a cat" --prompt "The sun"
      --prompt "Once upon a time there was a little girl named Lily who loved to play outside")
    compare_generate "--pipeline-parallel-size 2" --model "$model" "${many[@]}" --max-tokens 40 \
      --temperature 0 --ignore-eos --json
    compare_generate "--pipeline-parallel-size 2" --model "$model" "${many[@]}" --max-tokens 24 \
      --temperature 0 --ignore-eos --json --max-num-batched-tokens 16 --max-num-seqs 8
    compare_generate "--pipeline-parallel-size 2" --model "$model" --prompt "Once upon a time" \
      --prompt "The little dog" --max-tokens 24 --temperature 0.8 --seed 7 --n 3 --ignore-eos \
      --json
    compare_generate "--pipeline-parallel-size 2" --model "$model" "${prompts[@]}" --max-tokens 80 \
      --temperature 0 --ignore-eos --json --num-kv-blocks 13 --max-model-len 128
    # The steps did overlap: most started while the previous one was in the second stage.
    "${mpi[@]}" "$vellum" bench throughput --model "$model" --input-len 16 --output-len 32 \
      --num-prompts 16 --pipeline-parallel-size 2 "${common[@]}" >"$tmp/out" 2>&1 ||
      fail "bench throughput: $(cat "$tmp/out")"
    line=$(grep "^Pipeline: " "$tmp/out") || fail "no pipeline line: $(cat "$tmp/out")"
    echo "$line"
    read -r overlapped total < <(echo "$line" | sed -E 's/^Pipeline: ([0-9]+) of ([0-9]+) .*/\1 \2/')
    [ "$total" -gt 0 ] && [ $((2 * overlapped)) -ge "$total" ] ||
      fail "only $overlapped of $total steps overlapped an earlier one"
    echo "ok: pipeline steps overlap"
    # Tensor x pipeline on 4 ranks: rank 0 sends each step to three workers while steps overlap.
    mpi=(mpirun --oversubscribe --bind-to none -np 4)
    compare_generate "--tensor-parallel-size 2 --pipeline-parallel-size 2" --model "$model" \
      "${many[@]}" --max-tokens 24 --temperature 0 --ignore-eos --json --max-num-batched-tokens 16 \
      --max-num-seqs 8
    ;;
  pp2_aborts)
    # Clients that hang up while their steps are in flight (two stages, two steps in flight):
    # their requests are aborted, n = 2 parents among them, and the server goes on serving.
    start_server --pipeline-parallel-size 2
    for i in 1 2 3 4 5 6 7 8; do
      body='{"model": "'$model'", "prompt": "Once", "max_tokens": 400, "ignore_eos": true,
        "stream": true, "n": 2, "temperature": 0.8, "seed": '$i'}'
      curl -s -N --max-time 0.$((i + 1)) "http://127.0.0.1:$port/v1/completions" \
        -H 'Content-Type: application/json' -d "$body" >/dev/null &
    done
    wait $(jobs -p | grep -vx "$job")
    expect_served_completion
    for ((i = 0; i < 100; i++)); do
      running=$(curl -sf "http://127.0.0.1:$port/metrics" |
        grep -o '^vellum:num_requests_running{[^}]*} [0-9.e+-]*' | grep -o '[^ ]*$')
      [ "$running" = 0 ] || [ "$running" = 0.0 ] && break
      sleep 0.1
    done
    [ "$running" = 0 ] || [ "$running" = 0.0 ] || fail "requests still running: $running"
    aborted=$(curl -sf "http://127.0.0.1:$port/metrics" |
      grep -o '^vellum:request_success_total{[^}]*finished_reason="abort"[^}]*} [0-9.e+]*' |
      grep -o '[^ ]*$')
    awk -v n="$aborted" 'BEGIN { exit !(n >= 1) }' || fail "no request was aborted ($aborted)"
    echo "ok: $aborted requests aborted by their clients"
    # SIGTERM to rank 0 (the server) ends the whole job cleanly.
    kill -TERM "$(rank_pid "$job" 0)"
    wait_gone "$job" 30 "the server did not stop within 30 s of SIGTERM"
    wait "$job" || fail "the server exited non-zero: $(cat "$tmp/serve.out")"
    echo "ok: aborts with steps in flight leave the pipeline serving"
    ;;
  tp2_chunked_prefill)
    # A 16-token budget cuts the prompts into chunks that run next to other requests' decodes.
    compare_generate "--tensor-parallel-size 2" --model "$model" "${prompts[@]}" \
      --prompt "Once upon a time there was a little girl named Lily who loved to play outside" \
      --max-tokens 32 --temperature 0 --ignore-eos --json --max-num-batched-tokens 16 \
      --max-num-seqs 4
    ;;
  tp2_generated_model)
    # Models the project writes itself (always available): a vocabulary of 877 tokens, which
    # the ranks' LM heads split unevenly (439 + 438 rows), in f32 and in Q8_0.
    for dtype in f32 q8_0; do
      "$vellum" make-model --shape tiny --dtype $dtype --seed 5 --output "$tmp/tiny-$dtype.gguf" \
        >/dev/null || fail "make-model failed"
      for parallel in "--tensor-parallel-size 2" "--pipeline-parallel-size 2"; do
        compare_generate "$parallel" --model "$tmp/tiny-$dtype.gguf" --prompt Hello --prompt World \
          --max-tokens 16 --temperature 0 --ignore-eos --json
      done
    done
    ;;
  tp2_arch)
    # Architectures with biases (qwen2), q/k norms (qwen3), sandwich norms and softcaps (gemma2),
    # fused QKV and gate|up (phi3), mixture-of-experts (experts split by FFN width), and weight
    # types sliced by rows and by whole 32-blocks.
    for m in qwen2-f16 qwen3-f16 gemma2-f16 phi3-f16 llama-q8_0 llama-q4_0 llama-moe-f16 qwen3moe-f16; do
      [ -f "$arch/$m.gguf" ] || skip_for_missing_model "$arch/$m.gguf"
      compare_generate "--tensor-parallel-size 2" --model "$arch/$m.gguf" --prompt Once \
        --prompt Hello --max-tokens 16 --temperature 0 --ignore-eos --json
    done
    # Gemma's hybrid KV cache groups (full and sliding layers) split across pipeline stages.
    for m in gemma2-f16 gemma3-f16; do
      compare_generate "--pipeline-parallel-size 2" --model "$arch/$m.gguf" --prompt Once \
        --prompt Hello --max-tokens 16 --temperature 0 --ignore-eos --json
    done
    ;;
  tp2_sampling_n)
    # n > 1 with a seed: rank 0 samples from the gathered logits like one process does.
    compare_generate "--tensor-parallel-size 2" --model "$model" --prompt "Once upon a time" \
      --prompt "The little dog" --max-tokens 24 --temperature 0.8 --seed 7 --n 3 --ignore-eos \
      --json
    ;;
  tp2_beam_search)
    printf '%s\n' \
      '{"prompt": "Once upon a time", "use_beam_search": true, "n": 3, "temperature": 0, "max_tokens": 16, "ignore_eos": true}' \
      '{"prompt": "The little dog", "use_beam_search": true, "n": 2, "temperature": 0, "max_tokens": 12}' \
      >"$tmp/beams.jsonl"
    compare_generate "--tensor-parallel-size 2" --model "$model" --prompts "$tmp/beams.jsonl"
    ;;
  tp2_preemption)
    # 12 usable blocks of 16 tokens for 4 sequences of up to 88 tokens: requests are preempted
    # and recomputed (and swapped, below) while the others run.
    compare_generate "--tensor-parallel-size 2" --model "$model" "${prompts[@]}" --max-tokens 80 \
      --temperature 0 --ignore-eos --json --num-kv-blocks 13 --max-model-len 128
    compare_generate "--tensor-parallel-size 2" --model "$model" "${prompts[@]}" --max-tokens 80 \
      --temperature 0 --ignore-eos --json --num-kv-blocks 13 --max-model-len 128 \
      --preemption-mode swap --swap-space 16MiB
    ;;
  bench)
    "${mpi[@]}" "$vellum" bench latency --model "$model" --input-len 16 --output-len 8 \
      --num-iters 1 --tensor-parallel-size 2 "${common[@]}" >"$tmp/out" 2>&1 ||
      fail "bench latency: $(cat "$tmp/out")"
    grep -q "Decode:" "$tmp/out" || fail "bench latency printed no decode line: $(cat "$tmp/out")"
    "${mpi[@]}" "$vellum" bench throughput --model "$model" --input-len 16 --output-len 8 \
      --num-prompts 8 --pipeline-parallel-size 2 "${common[@]}" >"$tmp/out" 2>&1 ||
      fail "bench throughput: $(cat "$tmp/out")"
    grep -q "Throughput:" "$tmp/out" || fail "bench throughput printed no result: $(cat "$tmp/out")"
    echo "ok: bench latency (TP=2) and bench throughput (PP=2) ran"
    ;;
  startup_errors)
    "${mpi[@]}" "$vellum" generate --model "$model" --prompt x --tensor-parallel-size 3 \
      "${common[@]}" >"$tmp/out" 2>&1 && fail "3 ranks expected, 2 started: should fail"
    grep -q "mpirun started 2 processes but --tensor-parallel-size 3" "$tmp/out" ||
      fail "unclear error: $(cat "$tmp/out")"
    "$vellum" generate --model "$model" --prompt x --tensor-parallel-size 2 "${common[@]}" \
      >"$tmp/out" 2>&1 && fail "TP=2 without mpirun should fail"
    grep -q "needs 2 processes: launch with .mpirun -np 2" "$tmp/out" ||
      fail "unclear error: $(cat "$tmp/out")"
    # stories260K has 8 heads and 4 KV heads: 3 does not divide them.
    mpirun --oversubscribe --bind-to none -np 3 "$vellum" generate --model "$model" --prompt x \
      --tensor-parallel-size 3 "${common[@]}" >"$tmp/out" 2>&1 && fail "TP=3 should fail"
    grep -q "tensor-parallel-size 3 does not divide the model.*sizes that work for this model: 1, 2, 4" \
      "$tmp/out" || fail "unclear error: $(cat "$tmp/out")"
    # A KV budget too small for one sequence names the rank (each rank checks its own).
    "${mpi[@]}" "$vellum" generate --model "$model" --prompt x --tensor-parallel-size 2 \
      --kv-cache-dtype f32 --kv-cache-memory 16KiB --threads 1 >"$tmp/out" 2>&1 &&
      fail "a 16KiB KV cache should not hold a sequence"
    grep -q "error: rank 0: the KV cache .* cannot hold one sequence" "$tmp/out" ||
      fail "unclear error: $(cat "$tmp/out")"
    echo "ok: start-up errors name the problem"
    ;;
  killed_rank)
    # SIGKILL rank 1 in the middle of a long run: the job must end, non-zero, within seconds.
    "${mpi[@]}" "$vellum" "${long_run[@]}" --tensor-parallel-size 2 --log-level info \
      >"$tmp/out" 2>&1 &
    job=$!
    wait_started "$tmp/out"
    victim=$(rank_pid "$job" 1)
    [ -n "$victim" ] || fail "rank 1 not found among mpirun's children"
    kill -9 "$victim"
    wait_gone "$job" 30 "the job did not end within 30 s after rank 1 was killed"
    wait "$job" && fail "the job exited 0 after a rank was killed"
    cat "$tmp/out"
    grep -qi "rank 1.*\(killed\|signal\)\|did not answer" "$tmp/out" ||
      fail "the error does not say what happened"
    echo "ok: a killed rank ends the job with an error"
    ;;
  stopped_rank)
    # SIGSTOP rank 1: rank 0 notices the silence after --distributed-timeout and ends the job.
    # Stopped once both ranks are past start-up (their "KV cache:" lines): start-up waits have
    # their own, longer deadline (a slow rank may still be loading the model).
    "${mpi[@]}" "$vellum" "${long_run[@]}" --tensor-parallel-size 2 --distributed-timeout 3 \
      --log-level info >"$tmp/out" 2>&1 &
    job=$!
    wait_started "$tmp/out"
    stop_rank_expect_end "$job" 1
    echo "ok: a silent rank ends the job with an error naming it"

    # An idle server on 2 ranks, then SIGSTOP rank 0 (the server itself): rank 1, which hears
    # keep-alives from an idle rank 0 every third of --distributed-timeout, notices the silence
    # and ends the job, non-zero, instead of waiting for the next step forever.
    "${mpi[@]}" "$vellum" serve "$model" --port 0 --tensor-parallel-size 2 \
      --distributed-timeout 3 --log-level info "${common[@]}" >"$tmp/out" 2>&1 &
    job=$!
    wait_started "$tmp/out"
    sleep 4  # idle for longer than the timeout: the keep-alives hold the job together
    kill -0 "$job" 2>/dev/null || fail "the idle job ended: $(cat "$tmp/out")"
    stop_rank_expect_end "$job" 0
    echo "ok: a silent rank 0 ends the job with an error naming it"
    ;;
  serve)
    # The server on 2 ranks: the same completion as one process; then rank 1 stops answering:
    # the running request fails, /health stops saying 200, the job exits non-zero.
    start_server --tensor-parallel-size 2
    expect_served_completion
    # Long enough (32 x 1500 tokens, a few seconds) to be running when rank 1 stops: a request
    # that finished first would leave an idle server that has nothing to wait for.
    long='{"model": "'$model'", "prompt": "Once", "max_tokens": 1500, "ignore_eos": true, "n": 32}'
    curl -s -o "$tmp/failed.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" \
      -H 'Content-Type: application/json' -d "$long" >"$tmp/failed.code" &
    sleep 1
    victim=$(rank_pid "$job" 1)
    [ -n "$victim" ] || fail "rank 1 not found"
    kill -STOP "$victim"
    wait_gone "$job" 30 "the server did not exit within 30 s after rank 1 stopped answering"
    kill -9 "$victim" 2>/dev/null
    wait "$job" && fail "the server exited 0 after a rank stopped answering"
    wait
    code=$(cat "$tmp/failed.code")
    [ "$code" != 200 ] || fail "the running request succeeded: $(cat "$tmp/failed.json")"
    health=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
    [ "$health" != 200 ] || fail "/health still says 200"
    cat "$tmp/serve.out"
    grep -q "rank 1 did not answer within 3 s" "$tmp/serve.out" ||
      fail "the server's error does not name the silent rank"
    echo "ok: the running request failed ($code), the server exited non-zero"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
