#!/bin/sh
# serve_engine_death.sh VELLUM MODEL: `vellum serve` whose engine dies (fault injection) answers
# /health 503 or is already gone, and exits non-zero on its own instead of hanging.
set -u
vellum=$1
model=$2
log=$(mktemp)
VELLUM_FAULT_INJECT_REQUEST_ID=fatal VELLUM_FAULT_INJECT_FATAL=1 \
  "$vellum" serve "$model" --port 0 --kv-cache-memory 64MiB --threads 1 2>"$log" &
pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$log" | head -n 1)
  if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  sleep 0.2
done
if [ -z "$port" ]; then echo "server did not start"; cat "$log"; kill "$pid"; exit 1; fi
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"prompt": "Once", "max_tokens": 4, "request_id": "fatal-1"}' \
  "http://127.0.0.1:$port/v1/completions")
echo "completion with the fatal fault: HTTP $code"
[ "$code" = 500 ] || { echo "expected 500"; kill "$pid"; exit 1; }
health=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
echo "/health after the fault: $health (000: already exited)"
[ "$health" = 503 ] || [ "$health" = 000 ] || { echo "expected 503"; kill "$pid"; exit 1; }
# It must exit by itself, non-zero, within seconds.
for _ in $(seq 1 100); do
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then echo "still running 10 s after the engine died"; kill "$pid"; exit 1; fi
wait "$pid"
status=$?
cat "$log"
echo "exit status $status"
rm -f "$log"
[ "$status" -ne 0 ]
