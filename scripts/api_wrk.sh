#!/usr/bin/env bash
# Load test of the HTTP service with wrk (Debian package): best-known queries, result posts,
# measurement posts, and best-known queries while suggestions with 1,000 observations are
# being computed. Starts its own server on an ephemeral port with a temporary database.
#
#   scripts/api_wrk.sh path/to/tunebase [seconds per run, default 10]
#
# Environment: THREADS (server I/O threads, default 2), COMPUTE (compute threads, default 2),
# CONNECTIONS (default 64), LEASES (trials leased for the result-post run, default 100000: more than the run posts).
set -euo pipefail

tunebase=$(realpath "${1:?usage: api_wrk.sh path/to/tunebase [seconds]}")
duration=${2:-10}
threads=${THREADS:-2}
compute=${COMPUTE:-2}
connections=${CONNECTIONS:-64}
leases=${LEASES:-100000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
server_pid=""
loop_pids=()
cleanup() {
  for p in "${loop_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

db="$work/wrk.db"
token=$("$tunebase" token create wrk --db "$db" 2>/dev/null)
"$tunebase" serve --db "$db" --port 0 --threads "$threads" --compute-threads "$compute" \
  >"$work/serve.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/serve.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log"; exit 1; }
url="http://127.0.0.1:$port"
auth="Authorization: Bearer $token"
post() { curl -sS --fail-with-body -X POST -H "$auth" -H 'Content-Type: application/json' --data "$2" "$url$1"; }
id_of() { sed -n 's/.*"id":\([0-9]*\),"kernel".*/\1/p'; }

echo "== machine: $(nproc) cores, $(uptime)"
echo "== server: $url, $threads I/O threads, $compute compute threads"
post /v1/machines '{"name": "m1"}' >/dev/null
wrk_study=$(post /v1/studies '{"name": "wrk", "kernel": "wrkdemo", "machine": "m1",
  "strategy": "random", "space": {"parameters": [{"name": "x", "type": "real", "low": 0, "high": 1e7}]}}' | id_of)
post "/v1/studies/$wrk_study/measurements" '{"measurements": [{"config": {"x": 0.5}, "value": 1.0}]}' >/dev/null

run() {  # run TITLE wrk-args...
  echo
  echo "== $1"
  shift
  echo "\$ wrk $*"
  wrk "$@"
}

best="$url/v1/best?kernel=wrkdemo&machine=m1"
run "GET best known" -t2 -c"$connections" -d"${duration}s" --latency "$best"

ok_count() {  # trials with status ok in the wrk study, as the server reports them
  curl -sS "$url/v1/studies/$wrk_study" | grep -o '"ok":[0-9]*' | head -1 | cut -d: -f2
}
stored_since() {  # stored_since BEFORE: ok trials added since
  echo "== stored: $(( $(ok_count) - $1 )) more ok trials in the database (each acknowledged write must be among them)"
}

before=$(ok_count)
run "POST measurements (one per request, each committed before the reply)" \
  -t2 -c"$connections" -d"${duration}s" --latency -s "$here/wrk/measurements.lua" "$url" -- \
  "$token" "$wrk_study"
stored_since "$before"

echo
echo "== leasing $leases trials to client wrk"
first=""
for _ in $(seq $((leases / 1000))); do
  reply=$(post "/v1/studies/$wrk_study/suggestions" '{"n": 1000, "client_id": "wrk"}')
  [ -n "$first" ] || first=$(echo "$reply" | grep -o '"trial_id":[0-9]*' | awk -F: 'NR == 1 {print $2}')
done
before=$(ok_count)
run "POST results of leased trials (each committed before the reply)" \
  -t2 -c"$connections" -d"${duration}s" --latency -s "$here/wrk/results.lua" "$url" -- "$token" "$first"
stored_since "$before"

# Studies with 1,000 observations each; the first suggestion of each fits a GP on all of them.
echo
echo "== creating studies with 1000 observations (bo)"
measurements=$(awk 'BEGIN {
  n = 0; printf "{\"measurements\": [";
  for (i = 0; i < 4096 && n < 1000; i += 4) {
    a = 2 ^ (i % 8); b = 2 ^ (int(i / 8) % 8); c = int(i / 64) % 8 + 1; d = int(i / 512) % 2;
    e = 2 ^ (int(i / 1024) % 4);
    v = 1 + (log(a) / log(2) - 3) ^ 2 + 0.5 * (log(b) / log(2) - 4) ^ 2 + 0.1 * c + 0.3 * d + 0.2 * log(e) / log(2);
    printf "%s{\"config\": {\"a\": %d, \"b\": %d, \"c\": %d, \"d\": %d, \"e\": %d}, \"value\": %.6f}",
           (n ? ", " : ""), a, b, c, d, e, v;
    n++;
  }
  printf "]}" }')
space='{"parameters": [{"name": "a", "values": [1, 2, 4, 8, 16, 32, 64, 128]},
  {"name": "b", "values": [1, 2, 4, 8, 16, 32, 64, 128]}, {"name": "c", "values": [1, 2, 3, 4, 5, 6, 7, 8]},
  {"name": "d", "values": [0, 1]}, {"name": "e", "values": [1, 2, 4, 8]}]}'
studies=()
for i in $(seq 24); do
  s=$(post /v1/studies "{\"name\": \"bo$i\", \"kernel\": \"bo1000\", \"machine\": \"m1\", \"strategy\": \"bo\", \"seed\": $i, \"space\": $space}" | id_of)
  post "/v1/studies/$s/measurements" "$measurements" >/dev/null
  studies+=("$s")
done
suggest_loop() {  # one client asking each study in turn for a suggestion
  for s in "$@"; do
    post "/v1/studies/$s/suggestions" '{"n": 1, "client_id": "loop"}' |
      grep -o '"propose_seconds":[0-9.e-]*' >>"$work/propose.txt" || true
  done
}
: >"$work/propose.txt"
suggest_loop "${studies[@]:0:12}" &
loop_pids+=($!)
suggest_loop "${studies[@]:12:12}" &
loop_pids+=($!)
sleep 1
run "GET best known while suggestions with 1000 observations are computed" \
  -t2 -c"$connections" -d"${duration}s" --latency "$best"
echo
echo "== suggestions finished during that run: $(wc -l <"$work/propose.txt" | tr -d ' ') of 24"
for p in "${loop_pids[@]}"; do wait "$p" || true; done
loop_pids=()
echo "== all 24 suggestions (1000 observations each), propose_seconds:"
sed 's/"propose_seconds"://' "$work/propose.txt" | tr '\n' ' '
echo
curl -s "$url/metrics" | grep -E '^tunebase_suggestion_duration_seconds_(sum|count)'
