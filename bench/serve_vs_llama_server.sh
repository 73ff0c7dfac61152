#!/usr/bin/env bash
# Vellum vs llama.cpp's llama-server on the same GGUF: the same random token-id prompts
# (128 in / 128 out, ignore_eos), greedy sampling, THREADS threads each, one server at a time,
# measured by two clients at each concurrency: `vellum bench serve` and AIPerf (PyPI, pinned;
# runs offline with a tokenizer exported from the GGUF itself). Prints lscpu's model name and
# ISA flags, then one markdown table per model: output tok/s, TTFT and TPOT p50/p99, and the
# ratio Vellum / llama-server per client and concurrency. See bench/serve_vs_llama_server.md.
#
#   bench/serve_vs_llama_server.sh VELLUM_BIN LLAMA_SERVER_BIN [MODEL.gguf ...]
#     MODEL default: both models in ${VELLUM_MODELS_DIR:-build/models/real}
#   env: CONCURRENCY="1 8 32 64"  NUM_PROMPTS (per level; default WAVES=2 x concurrency, >= 8)
#        THREADS=2  PORTS="8391 8392" (vellum, llama-server)  INPUT_LEN=128  OUTPUT_LEN=128
#        CLIENTS="vellum aiperf"  AIPERF=/work/benchvenv/bin/aiperf  OUT_DIR (raw results)
#        SERVERS="llama vellum" (run one side only; with the same OUT_DIR, a later run's tables
#        include the earlier run's results)
#        OWN_AUTOGROUP (default: shared/bench/own-autogroup.sh beside the repo; "none": don't)
#        VOCAB_SIZE=32000 MIN_TOKEN_ID=1000 (prompt token ids, ordinary tokens in both models)
#
# The whole script re-runs itself under own-autogroup.sh, so that every server and client it
# starts shares one nice -20 scheduler autogroup. Only one server runs at a time.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
self="$repo/bench/$(basename "$0")"

if [ -z "${SERVEBENCH_IN_AUTOGROUP:-}" ]; then
  ag=${OWN_AUTOGROUP:-}
  if [ -z "$ag" ]; then
    for cand in "$repo/../shared/bench/own-autogroup.sh" "$repo/shared/bench/own-autogroup.sh" \
                /work/shared/bench/own-autogroup.sh; do
      [ -x "$cand" ] && { ag=$cand; break; }
    done
  fi
  if [ "$ag" != none ]; then
    [ -n "$ag" ] && [ -x "$ag" ] || {
      echo "own-autogroup.sh not found; set OWN_AUTOGROUP=/path/to/it (or OWN_AUTOGROUP=none)" >&2
      exit 2
    }
    SERVEBENCH_IN_AUTOGROUP=1 exec "$ag" "$self" "$@"
  fi
fi

[ $# -ge 2 ] || { sed -n '2,19p' "$self" >&2; exit 2; }
vellum=$(realpath -m "$1"); llama=$(realpath -m "$2"); shift 2
if [ $# -gt 0 ]; then
  models=("$@")
else
  dir=${VELLUM_MODELS_DIR:-$repo/build/models/real}
  models=("$dir/SmolLM2-135M-Instruct.Q4_1.gguf" "$dir/gemma-3-270m-q4_k_m.gguf")
fi
for m in "${models[@]}"; do [ -f "$m" ] || { echo "no model file $m" >&2; exit 2; }; done
servers=${SERVERS:-llama vellum}
[ -x "$vellum" ] || { echo "not executable: $vellum" >&2; exit 2; }
[[ " $servers " != *" llama "* ]] || [ -x "$llama" ] || { echo "not executable: $llama" >&2; exit 2; }

conc=${CONCURRENCY:-1 8 32 64}
threads=${THREADS:-2}
read -r vport lport <<<"${PORTS:-8391 8392}"
in_len=${INPUT_LEN:-128}
out_len=${OUTPUT_LEN:-128}
clients=${CLIENTS:-vellum aiperf}
aiperf=${AIPERF:-/work/benchvenv/bin/aiperf}
vocab=${VOCAB_SIZE:-32000}
min_tok=${MIN_TOKEN_ID:-1000}
out_dir=${OUT_DIR:-$(mktemp -d /tmp/servebench.XXXXXX)}
mkdir -p "$out_dir"
max_c=0; for c in $conc; do [ "$c" -gt "$max_c" ] && max_c=$c; done
# llama-server splits -c evenly over its --parallel slots: each slot gets SLOT_CTX tokens,
# room for the prompt and the 128 outputs plus headroom so no slot ever hits its limit.
slot_ctx=${SLOT_CTX:-$(( (in_len + out_len) * 3 / 2 ))}
if [[ " $clients " == *" aiperf "* ]]; then
  [ -x "$aiperf" ] || { echo "AIPerf not found at $aiperf (see bench/serve_vs_llama_server.md)" >&2; exit 2; }
  py=$(dirname "$aiperf")/python
fi

num_prompts() {  # requests per concurrency level
  if [ -n "${NUM_PROMPTS:-}" ]; then echo "$NUM_PROMPTS"; else
    local n=$(( $1 * ${WAVES:-2} )); [ "$n" -lt 8 ] && n=8; echo "$n"; fi
}

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap stop_server EXIT
trap "exit 143" INT TERM

wait_health() {  # PORT LOG
  for _ in $(seq 1 600); do
    curl -sf "127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || { echo "server died:" >&2; tail -30 "$2" >&2; exit 1; }
    sleep 1
  done
  echo "server on port $1 not healthy after 600 s" >&2; tail -30 "$2" >&2; exit 1
}

# One 128-token completion with ignore_eos, to check the server really generates OUTPUT_LEN
# tokens and reports them in usage (both clients count output tokens from usage).
check_usage() {  # PORT NAME
  local body usage
  body=$(python3 -c "import json,sys; print(json.dumps({'model': sys.argv[1], 'prompt': list(range($min_tok, $min_tok + $in_len)), 'max_tokens': $out_len, 'temperature': 0, 'ignore_eos': True}))" "$2")
  usage=$(curl -sf "127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' -d "$body" |
          python3 -c "import json,sys; u=json.load(sys.stdin)['usage']; print(u['prompt_tokens'], u['completion_tokens'])")
  echo "usage check ($2): prompt_tokens completion_tokens = $usage"
  [ "${usage#* }" = "$out_len" ] || { echo "server did not generate $out_len tokens" >&2; exit 1; }
}

run_vellum_client() {  # PORT NAME C N RESULT
  "$vellum" bench serve --port "$1" --model "$2" --random-input-len "$in_len" \
    --random-output-len "$out_len" --num-prompts "$4" --max-concurrency "$3" --request-rate inf \
    --seed 1 --ignore-eos --vocab-size "$vocab" --min-token-id "$min_tok" \
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 --disable-tqdm \
    --save-result --save-detailed --result-dir "$(dirname "$5")" --result-filename "$(basename "$5")" \
    >"${5%.json}.log" 2>&1 || { echo "vellum bench serve failed:" >&2; tail -20 "${5%.json}.log" >&2; exit 1; }
}

run_aiperf_client() {  # PORT NAME C N RESULT_DIR TOKENIZER
  # Synthetic prompts of INPUT_LEN tokens of the model's own tokenizer (exported from the GGUF),
  # max_tokens OUTPUT_LEN with ignore_eos, output tokens counted from the servers' usage.
  # (Not HF_HUB_OFFLINE=1: AIPerf 0.13.0's offline mode looks a local path up in the hub cache
  # and fails; a local directory is loaded as it is, without the hub.)
  "$aiperf" profile --model "$2" --url "http://127.0.0.1:$1" \
    --endpoint-type completions --streaming --tokenizer "$6" \
    --prompt-input-tokens-mean "$in_len" --prompt-input-tokens-stddev 0 \
    --prompt-output-tokens-mean "$out_len" --prompt-output-tokens-stddev 0 --use-legacy-max-tokens \
    --extra-inputs ignore_eos:true --extra-inputs temperature:0 --use-server-token-count \
    --concurrency "$3" --request-count "$4" --random-seed 1 \
    --artifact-dir "$5" --ui-type none --workers-max "${AIPERF_WORKERS:-1}" \
    --no-server-metrics --no-gpu-telemetry \
    >"$5.log" 2>&1 || { echo "aiperf failed:" >&2; tail -30 "$5.log" >&2; exit 1; }
}

echo "## Vellum vs llama-server ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs online, $threads threads per server"
isa_re='sse4_2|avx|avx2|fma|f16c|avx_vnni|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8|amx_bf16'
echo "- ISA: $(lscpu | sed -n 's/^Flags: *//p' | tr ' ' '\n' | grep -x -E "$isa_re" | tr '\n' ' ')"
echo "- llama-server: $("$llama" --version 2>&1 | grep -m1 -i version || echo unknown) ($llama)"
echo "- vellum: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- $in_len input / $out_len output tokens (ignore_eos), greedy, random token ids [$min_tok, $vocab), request rate inf, concurrency: $conc; raw results: $out_dir"
echo

for model in "${models[@]}"; do
  name=$(basename "$model" .gguf)
  mdir="$out_dir/$name"; mkdir -p "$mdir"
  tok=
  if [[ " $clients " == *" aiperf "* ]]; then
    tok="$mdir/tokenizer"
    # AIPerf needs a Hugging Face tokenizer to build its prompts; export the GGUF's own.
    HF_HUB_OFFLINE=1 "$py" "$repo/bench/gguf_tokenizer_to_hf.py" "$model" "$tok" >"$mdir/tokenizer.log" 2>&1 ||
      { cat "$mdir/tokenizer.log" >&2; exit 1; }
  fi
  for server in $servers; do
    log="$mdir/$server-server.log"
    if [ "$server" = llama ]; then
      port=$lport
      # --parallel max concurrency, -c = slots x slot_ctx (split evenly over the slots), no
      # prompt cache (neither the slot's own KV prefix reuse nor the host-RAM prompt cache),
      # so that a request never starts from a previous request's KV cache.
      "$llama" -m "$model" --alias "$name" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
        --parallel "$max_c" -c $((max_c * slot_ctx)) --cont-batching --no-cache-prompt --cache-ram 0 \
        --no-ui >"$log" 2>&1 &
    else
      port=$vport
      "$vellum" serve "$model" --served-model-name "$name" --host 127.0.0.1 --port "$port" \
        --threads "$threads" --max-num-seqs "$max_c" --no-enable-prefix-caching >"$log" 2>&1 &
    fi
    server_pid=$!
    wait_health "$port" "$log"
    check_usage "$port" "$name" | tee "$mdir/$server-usage.txt"
    for c in $conc; do
      n=$(num_prompts "$c")
      for client in $clients; do
        echo "  $name $server $client c=$c n=$n ..." >&2
        if [ "$client" = vellum ]; then
          run_vellum_client "$port" "$name" "$c" "$n" "$mdir/$server-vellum-c$c.json"
        else
          run_aiperf_client "$port" "$name" "$c" "$n" "$mdir/$server-aiperf-c$c" "$tok"
        fi
      done
    done
    stop_server
  done

  python3 - "$mdir" "$name" "$out_len" "$conc" "$clients" <<'EOF'
import glob, json, os, sys
mdir, name, out_len = sys.argv[1], sys.argv[2], int(sys.argv[3])
concs = [int(c) for c in sys.argv[4].split()]
clients = sys.argv[5].split()

def vellum_row(path):
    j = json.load(open(path))
    lens = j.get("output_lens", [])
    short = sum(1 for x in lens if x != out_len)
    return dict(tps=j["output_throughput"], ttft50=j["median_ttft_ms"], ttft99=j["p99_ttft_ms"],
                tpot50=j["median_tpot_ms"], tpot99=j["p99_tpot_ms"], ok=j["completed"],
                failed=j["failed"], short=short, out=j["total_output_tokens"])

def aiperf_row(d):
    files = glob.glob(os.path.join(d, "**", "profile_export_aiperf.json"), recursive=True)
    if not files:
        return None
    j = json.load(open(files[0]))
    def metric(*keys):
        for k in keys:
            if k in j and isinstance(j[k], dict):
                return j[k]
        return {}
    tput = metric("output_token_throughput")
    ttft = metric("time_to_first_token")
    itl = metric("inter_token_latency")
    osl = metric("output_sequence_length")
    cnt = metric("request_count")
    err = metric("error_request_count")
    return dict(tps=tput.get("avg"), ttft50=ttft.get("p50"), ttft99=ttft.get("p99"),
                tpot50=itl.get("p50"), tpot99=itl.get("p99"), ok=cnt.get("avg"),
                failed=err.get("avg", 0), short=None if osl.get("min") is None else
                int(osl.get("min") != out_len or osl.get("max") != out_len), out=None)

rows = {}
for server in ("llama", "vellum"):
    for client in clients:
        for c in concs:
            if client == "vellum":
                p = os.path.join(mdir, f"{server}-vellum-c{c}.json")
                rows[server, client, c] = vellum_row(p) if os.path.exists(p) else None
            else:
                rows[server, client, c] = aiperf_row(os.path.join(mdir, f"{server}-aiperf-c{c}"))

def f(x, d=1):
    return "n/a" if x is None else f"{x:.{d}f}"

label = {"llama": "llama-server", "vellum": "vellum serve"}
cname = {"vellum": "vellum bench serve", "aiperf": "aiperf"}
print(f"### {name}\n")
print("| server | client | concurrency | output tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | ok / failed | all 128 tok |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for client in clients:
    for c in concs:
        for server in ("llama", "vellum"):
            r = rows[server, client, c]
            if r is None:
                print(f"| {label[server]} | {cname[client]} | {c} | missing |||||||")
                continue
            allfull = "n/a" if r["short"] is None else ("yes" if r["short"] == 0 else "NO")
            print(f"| {label[server]} | {cname[client]} | {c} | {f(r['tps'])} | {f(r['ttft50'])} | "
                  f"{f(r['ttft99'])} | {f(r['tpot50'], 2)} | {f(r['tpot99'], 2)} | "
                  f"{f(r['ok'], 0)} / {f(r['failed'], 0)} | {allfull} |")
print("\nRatio vellum serve / llama-server (tok/s: > 1 is Vellum faster; latencies: < 1 is Vellum faster)\n")
print("| client | concurrency | output tok/s | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 |")
print("|---|---:|---:|---:|---:|---:|---:|")
for client in clients:
    for c in concs:
        v, l = rows["vellum", client, c], rows["llama", client, c]
        if v is None or l is None:
            print(f"| {cname[client]} | {c} | n/a | n/a | n/a | n/a | n/a |")
            continue
        def r(k):
            return "n/a" if not v[k] or not l[k] else f"{v[k] / l[k]:.2f}"
        print(f"| {cname[client]} | {c} | {r('tps')} | {r('ttft50')} | {r('ttft99')} | {r('tpot50')} | {r('tpot99')} |")
print()
EOF
done
