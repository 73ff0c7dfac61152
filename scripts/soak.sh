#!/usr/bin/env bash
# Soak test (not part of CI): runs `vellum serve` for a while under 64 streaming clients
# (scripts/soak_client.mjs: completions on random prompt lengths up to the context limit, a share
# of them on shared prefixes; chat with structured outputs; random sampling parameters with
# n > 1 and logprobs; random cancellations), then checks:
#   - no request failed that should have succeeded (cancelled ones aside),
#   - the KV cache is empty again (kv_cache_usage_perc 0, nothing running or waiting: no leaked
#     blocks),
#   - resident memory stayed flat after warm-up (start, peak and end are reported; the end may
#     exceed the post-warm-up value by at most 10% + 64 MiB),
#   - p99 inter-token latency is stable: no window after warm-up has a p99 above 3x the first
#     one's (a shared, noisy machine moves it; a leak or a slowdown grows it).
# Prints p50 / p99 time to first token and inter-token latency per window.
#   scripts/soak.sh [DURATION_S (default 1800)]
#                   [MODEL (default $VELLUM_MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf, the real
#                   model of scripts/models.sh; else a generated tiny model)]
# Env: CONCURRENCY (64), WARMUP_S (10% of the duration), WINDOW_S (300), MAX_MODEL_LEN (2048),
#      KV_CACHE_MEMORY (128MiB), VELLUM (build/ci/src/cli/vellum),
#      SERVE_ARGS (extra `vellum serve` options).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-1800}
model=${2:-${VELLUM_MODELS_DIR:-build/models/real}/SmolLM2-135M-Instruct.Q4_1.gguf}
concurrency=${CONCURRENCY:-64}
warmup=${WARMUP_S:-$((duration / 10))}
window=${WINDOW_S:-300}
max_model_len=${MAX_MODEL_LEN:-2048}
vellum=${VELLUM:-build/ci/src/cli/vellum}
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

if [ ! -x "$vellum" ]; then
  echo "soak: $vellum not built (cmake --build build/ci --target vellum)" >&2
  exit 1
fi
if [ ! -f "$model" ]; then
  model=$work/tiny.gguf
  "$vellum" make-model --shape tiny --dtype q8_0 --seed 1 --output "$model" >/dev/null
fi

# A KV budget small enough that the clients cycle through every block during warm-up: the pool's
# pages are touched lazily, so a large budget would read as RSS growth (and it exercises
# preemption under pressure).
# shellcheck disable=SC2086
"$vellum" serve "$model" --port 0 --max-num-seqs 64 --kv-cache-memory "${KV_CACHE_MEMORY:-128MiB}" \
  --max-model-len "$max_model_len" --max-logprobs 5 --served-model-name soak ${SERVE_ARGS:-} \
  2>"$work/server.log" &
server=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log" | head -n 1)
  if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$work/server.log"; exit 1; }
url=http://127.0.0.1:$port
echo "soak: $model on $url for ${duration}s, $concurrency clients, warm-up ${warmup}s," \
  "windows of ${window}s, max-model-len $max_model_len"

node scripts/soak_client.mjs "$url" "$server" "$duration" "$concurrency" "$warmup" "$window" \
  "$max_model_len" >"$work/report.json"
sleep 2
metrics=$(curl -sf "$url/metrics")
metric() { echo "$metrics" | awk -v name="$1" '$1 ~ "^vellum:"name"[{ ]" || $1 ~ "^vellum:"name"$" {print $2}' | head -n 1; }
kv=$(metric kv_cache_usage_perc)
running=$(metric num_requests_running)
waiting=$(metric num_requests_waiting)
kill -0 "$server" || { echo "soak: the server died"; cat "$work/server.log"; exit 1; }

cat "$work/report.json"
echo "after the run: kv_cache_usage_perc=$kv num_requests_running=$running num_requests_waiting=$waiting"
node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const [kv, running, waiting] = process.argv.slice(2).map(Number);
const problems = [];
if (r.requests.failed > 0) problems.push(`${r.requests.failed} requests failed: ${r.failures[0]}`);
if (r.requests.ok === 0) problems.push("no request succeeded");
if (kv !== 0 || running !== 0 || waiting !== 0) problems.push("KV blocks or requests left over");
const rss = r.rss_kib;
const base = rss.after_warmup ?? rss.at_start;
if (rss.end > base * 1.10 + 64 * 1024) problems.push(`RSS grew from ${base} KiB to ${rss.end} KiB`);
const w = r.windows.filter((x) => x.itl_samples >= 100);
if (w.length >= 2) {
  const worst = Math.max(...w.slice(1).map((x) => x.p99_itl_ms));
  if (worst > 3 * Math.max(1, w[0].p99_itl_ms)) {
    problems.push(`p99 inter-token latency rose from ${w[0].p99_itl_ms} ms to ${worst} ms`);
  }
}
console.log(`RSS (MiB): start ${(rss.at_start / 1024).toFixed(1)}, after warm-up ` +
  `${(base / 1024).toFixed(1)}, peak ${(rss.peak / 1024).toFixed(1)}, end ${(rss.end / 1024).toFixed(1)}`);
console.log("RSS per minute (s: MiB): " + rss.per_minute_mib.map(([t, m]) => `${t}: ${m}`).join(", "));
console.log("window from (s) | TTFT p50 / p99 (ms) | ITL p50 / p99 (ms) | first tokens | gaps");
for (const x of r.windows) {
  console.log(`${x.from_s} | ${x.p50_ttft_ms} / ${x.p99_ttft_ms} | ${x.p50_itl_ms} / ${x.p99_itl_ms} | ` +
    `${x.ttft_samples} | ${x.itl_samples}`);
}
console.log(`requests: ${r.requests.ok} ok (${JSON.stringify(r.requests.ok_by_kind)}), ` +
  `${r.requests.cancelled} cancelled, ${r.requests.failed} failed`);
if (problems.length) { console.log("soak: FAILED\n  " + problems.join("\n  ")); process.exit(1); }
console.log("soak: passed");
' "$work/report.json" "$kv" "$running" "$waiting"
