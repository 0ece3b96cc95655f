#!/usr/bin/env bash
# End-to-end check of the build-system integration: start `tunebase serve` on an ephemeral port
# with a temporary database, store a measurement, configure and build examples/configure_time
# against the live server (then against the database file through the CLI, then with no
# answer), and stop the server with SIGTERM.
#
#   scripts/example_e2e.sh path/to/tunebase
set -euo pipefail

tunebase=$(realpath "${1:?usage: example_e2e.sh path/to/tunebase}")
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -TERM "$server_pid"; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "example_e2e: FAILED: $*" >&2; [ -f "$work/serve.log" ] && cat "$work/serve.log" >&2; exit 1; }

db="$work/tunebase.db"
token=$("$tunebase" token create e2e --db "$db" 2>/dev/null)
start_server() {  # start_server [SERVE_OPTIONS...]: sets server_pid and url
  # The log exists before the first look: the background job's redirection may come later, and
  # a sed that cannot read it would end the script (set -e).
  : >"$work/serve.log"
  "$tunebase" serve --db "$db" --port 0 --threads 1 --compute-threads 1 "$@" \
    >"$work/serve.log" 2>&1 &
  server_pid=$!
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/serve.log")
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || fail "the server did not start"
    sleep 0.1
  done
  [ -n "$port" ] || fail "the server did not print its port"
  url="http://127.0.0.1:$port"
  echo "example_e2e: server at $url $*"
}
stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || fail "the server exited with $?"
  server_pid=""
  grep -q "database .* closed" "$work/serve.log" || fail "the server did not close the database"
}
start_server

post() {  # post PATH JSON -> body; fails on an HTTP error
  curl -sS --fail-with-body -X POST -H "Authorization: Bearer $token" \
       -H 'Content-Type: application/json' --data "$2" "$url$1" || fail "POST $1"
}
post /v1/machines '{"name": "e2e-machine", "fingerprint": {"cpu_model": "example"}}' >/dev/null
study=$(post /v1/studies '{"name": "e2e", "kernel": "blocked_sum", "machine": "e2e-machine",
  "strategy": "random", "space": {"parameters": [
    {"name": "block_size", "type": "ordinal", "values": [32, 64, 128, 256, 512]},
    {"name": "unroll", "type": "ordinal", "values": [1, 2, 4, 8]},
    {"name": "flags", "type": "categorical", "values": ["-O2;-g", "-O3"]}]}}' |
  sed -n 's/.*"id":\([0-9]*\),"kernel".*/\1/p')
[ -n "$study" ] || fail "no study id"
post "/v1/studies/$study/measurements" '{"measurements": [
  {"config": {"block_size": 64, "unroll": 1, "flags": "-O3"}, "value": 3.0e-3},
  {"config": {"block_size": 256, "unroll": 4, "flags": "-O2;-g"}, "value": 1.2e-3},
  {"config": {"block_size": 512, "unroll": 8, "flags": "-O3"}, "status": "failed",
   "message": "spilled"}]}' >/dev/null

check_build() {  # check_build NAME EXPECTED_SOURCE EXPECTED_BLOCK EXPECTED_UNROLL CMAKE_ARGS...
  local name=$1 source=$2 block=$3 unroll=$4
  shift 4
  local build="$work/build-$name"
  cmake -S "$repo/examples/configure_time" -B "$build" "$@" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "$name: configure"; }
  local header="$build/generated/blocked_sum_config.h"
  grep -q "#define BLOCKED_SUM_BLOCK_SIZE $block\$" "$header" || { cat "$header"; fail "$name: header"; }
  # A ';' in a string value (or in the header's comment) is kept, not dropped as a list separator.
  grep -q "(cmake/Tunebase.cmake); do not edit" "$header" || { cat "$header"; fail "$name: comment"; }
  if [ "$source" = measured ] && [ "$block" = 256 ]; then  # the study with flags
    grep -q '#define BLOCKED_SUM_FLAGS "-O2;-g"$' "$header" || { cat "$header"; fail "$name: flags"; }
  fi
  cmake --build "$build" >>"$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name: build"; }
  local out
  out=$("$build/blocked_sum")
  echo "example_e2e: $name: $out"
  [[ "$out" == "source=$source block_size=$block unroll=$unroll "* ]] || fail "$name: $out"
}

check_build server measured 256 4 -DTUNEBASE_SERVER="$url" -DTUNEBASE_MACHINE=e2e-machine
# The CLI reads the same database while the server runs (WAL: readers never block).
check_build database measured 256 4 -DTUNEBASE_DB="$db" -DTUNEBASE_EXECUTABLE="$tunebase" \
  -DTUNEBASE_MACHINE=e2e-machine
# No answer (a machine with nothing measured, no other machine to predict from): defaults.
check_build fallback defaults 64 1 -DTUNEBASE_SERVER="$url" -DTUNEBASE_MACHINE=elsewhere
grep -q "Using the defaults" "$work/fallback.log" || fail "fallback: no warning"
# The warning names the server's HTTP status, and its reason from the X-Tunebase-Message
# header (file(DOWNLOAD) keeps no body to quote).
grep -q "answered HTTP 404" "$work/fallback.log" || { cat "$work/fallback.log"; fail "fallback: no status"; }
tr -s ' \n' ' ' <"$work/fallback.log" | grep -q 'nothing measured for kernel "blocked_sum"' ||
  { cat "$work/fallback.log"; fail "fallback: no reason"; }
# A wrong server URL answers 404 too, but no tunebase "nothing known": the earlier answer stays.
cmake -S "$repo/examples/configure_time" -B "$work/build-server" \
  -DTUNEBASE_SERVER="$url/tunebase" >"$work/wrong-url.log" 2>&1 ||
  { cat "$work/wrong-url.log"; fail "wrong-url: configure"; }
tr -s ' \n' ' ' <"$work/wrong-url.log" | grep -q "Keeping the answer of an earlier configure" ||
  { cat "$work/wrong-url.log"; fail "wrong-url: the defaults replaced the answer"; }
grep -q "#define BLOCKED_SUM_BLOCK_SIZE 256$" "$work/build-server/generated/blocked_sum_config.h" ||
  fail "wrong-url: the header lost the measured answer"

# A study of a narrower space (block_size only): the answer's parameters, and the default of
# the one it lacks, with a warning (the header had no BLOCKED_SUM_UNROLL and the build broke).
post /v1/machines '{"name": "narrow-machine"}' >/dev/null
narrow=$(post /v1/studies '{"name": "narrow", "kernel": "blocked_sum", "machine": "narrow-machine",
  "strategy": "random", "space": {"parameters": [
    {"name": "block_size", "type": "ordinal", "values": [32, 128]}]}}' |
  sed -n 's/.*"id":\([0-9]*\),"kernel".*/\1/p')
post "/v1/studies/$narrow/measurements" \
  '{"measurements": [{"config": {"block_size": 128}, "value": 1.0e-3}]}' >/dev/null
check_build narrow measured 128 1 -DTUNEBASE_SERVER="$url" -DTUNEBASE_MACHINE=narrow-machine
# (CMake wraps a warning's lines.)
tr -s ' \n' ' ' <"$work/narrow.log" | grep -q "has no parameter unroll; using its default 1" ||
  { cat "$work/narrow.log"; fail "narrow: no warning"; }
# A kernel whose studies maximize (a rate): without MAXIMIZE the helper takes their direction,
# as `tunebase best` does, and gets the highest, not a 404 that would mean the defaults.
post /v1/machines '{"name": "rate-machine"}' >/dev/null
rate=$(post /v1/studies '{"name": "rate", "kernel": "blocked_sum", "machine": "rate-machine",
  "strategy": "random", "direction": "maximize", "objective": "GFLOP/s", "space": {"parameters": [
    {"name": "block_size", "type": "ordinal", "values": [32, 128]},
    {"name": "unroll", "type": "ordinal", "values": [1, 2]}]}}' |
  sed -n 's/.*"id":\([0-9]*\),"kernel".*/\1/p')
post "/v1/studies/$rate/measurements" '{"measurements": [
  {"config": {"block_size": 32, "unroll": 1}, "value": 10.0},
  {"config": {"block_size": 128, "unroll": 2}, "value": 20.0}]}' >/dev/null
check_build rate measured 128 2 -DTUNEBASE_SERVER="$url" -DTUNEBASE_MACHINE=rate-machine
check_build rate-db measured 128 2 -DTUNEBASE_DB="$db" -DTUNEBASE_EXECUTABLE="$tunebase" \
  -DTUNEBASE_MACHINE=rate-machine
# What `tunebase best` notes on stderr beside its answer is shown (as a status line: no warning).
grep -q "^-- tunebase: blocked_sum on rate-machine: the studies of blocked_sum maximize" \
  "$work/rate-db.log" || { cat "$work/rate-db.log"; fail "rate-db: the CLI's note is not shown"; }
# REQUIRED: no answer fails the configure.
if cmake -S "$repo/examples/configure_time" -B "$work/build-required" -DTUNEBASE_SERVER="$url" \
     -DTUNEBASE_MACHINE=elsewhere -DTUNEBASE_REQUIRED=ON >"$work/required.log" 2>&1; then
  fail "required: configured without an answer"
fi
tr -s ' \n' ' ' <"$work/required.log" | grep -q "REQUIRED: no defaults" || { cat "$work/required.log"; fail "required"; }

stop_server

# The server down: a build directory that had an answer keeps it (not the defaults).
cmake -S "$repo/examples/configure_time" -B "$work/build-server" >"$work/kept.log" 2>&1 ||
  { cat "$work/kept.log"; fail "kept: configure"; }
tr -s ' \n' ' ' <"$work/kept.log" | grep -q "Keeping the answer of an earlier configure" ||
  { cat "$work/kept.log"; fail "kept: no warning"; }
grep -q "#define BLOCKED_SUM_BLOCK_SIZE 256$" "$work/build-server/generated/blocked_sum_config.h" ||
  fail "kept: the header lost the measured answer"
# ...but not another machine's answer: the defaults then.
cmake -S "$repo/examples/configure_time" -B "$work/build-server" -DTUNEBASE_MACHINE=other.box \
  >"$work/kept-other.log" 2>&1 || { cat "$work/kept-other.log"; fail "kept-other: configure"; }
grep -q "#define BLOCKED_SUM_TUNEBASE_SOURCE \"defaults\"$" \
  "$work/build-server/generated/blocked_sum_config.h" || fail "kept-other: kept e2e-machine's answer"

# A server whose reads need a token: the helper sends $TUNEBASE_TOKEN (or its TOKEN argument).
start_server --auth-reads
TUNEBASE_TOKEN="$token" check_build auth measured 256 4 -DTUNEBASE_SERVER="$url" \
  -DTUNEBASE_MACHINE=e2e-machine
TUNEBASE_TOKEN= check_build no-token defaults 64 1 -DTUNEBASE_SERVER="$url" \
  -DTUNEBASE_MACHINE=e2e-machine
grep -q "answered HTTP 401" "$work/no-token.log" || { cat "$work/no-token.log"; fail "no-token: no status"; }
stop_server

# Predictions for machines not registered, from a fresh database: a server whose queue of
# questions to models holds one, and mybox's measurements to predict from (best: 128, 2).
db="$work/predict.db"
token=$("$tunebase" token create e2e --db "$db" 2>/dev/null)
start_server --model-threads 1 --max-model-questions 1
post /v1/machines '{"name": "mybox"}' >/dev/null
mybox=$(post /v1/studies '{"name": "mybox", "kernel": "blocked_sum", "machine": "mybox",
  "strategy": "random", "space": {"parameters": [
    {"name": "block_size", "type": "ordinal", "values": [32, 64, 128, 256, 512]},
    {"name": "unroll", "type": "ordinal", "values": [1, 2, 4, 8]}]}}' |
  sed -n 's/.*"id":\([0-9]*\),"kernel".*/\1/p')
[ -n "$mybox" ] || fail "no study id of mybox"
measurements=""
for block in 32 64 128 256 512; do
  for unroll in 1 2 4 8; do
    value=5.0e-3
    [ "$block" = 128 ] && [ "$unroll" = 2 ] && value=1.0e-3
    measurements+="${measurements:+,}{\"config\": {\"block_size\": $block, \"unroll\": $unroll},"
    measurements+=" \"value\": $value}"
  done
done
post "/v1/studies/$mybox/measurements" "{\"measurements\": [$measurements]}" >/dev/null

# A busy server: while a question to the models (a prediction of 100,000 configurations, a
# second or more each, three in a row) fills the queue, GET /v1/best for a machine not
# registered (a prediction too) is answered 503 with Retry-After; the helper waits and asks
# again within its TIMEOUT, and gets the prediction, not the defaults.
cmake -S "$repo/examples/configure_time" -B "$work/build-busy" >"$work/busy-first.log" 2>&1 ||
  { cat "$work/busy-first.log"; fail "busy: first configure"; }  # the compiler found before
config='{"block_size": 64, "unroll": 1}'
{ printf '{"study_id": %s, "configs": [%s' "$mybox" "$config"
  for _ in $(seq 99999); do printf ',%s' "$config"; done
  printf ']}'; } >"$work/many.json"
(for _ in 1 2 3; do
   curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' --data @"$work/many.json" \
     "$url/v1/predict"
 done) &
busy_pid=$!
for _ in $(seq 400); do
  curl -sS "$url/metrics" | grep -q '^tunebase_model_questions 1$' && break
  sleep 0.05
done
curl -sS "$url/metrics" | grep -q '^tunebase_model_questions 1$' ||
  fail "busy: the queue never filled"
check_build busy predicted 128 2 -DTUNEBASE_SERVER="$url" -DTUNEBASE_MACHINE=new-runner
wait "$busy_pid" || fail "busy: the predictions that kept the server busy failed"
grep -q "is busy (HTTP 503); asking again in 1 s" "$work/busy.log" ||
  { cat "$work/busy.log"; fail "busy: not asked again after Retry-After"; }
grep -q "answered after [1-9][0-9]* retries" "$work/busy.log" ||
  { cat "$work/busy.log"; fail "busy: no answer after retries"; }

# A misspelt machine gets a prediction as for a new machine, not mybox's measurement: the
# server's note (did you mean) is shown as a warning, and the CLI's (DB) too.
warned() {  # warned LOG TEXT: TEXT is the message of a CMake warning in LOG
  tr -s ' \n' ' ' <"$1" | grep -qF "(message): $2" || { cat "$1"; fail "no warning \"$2\" in $1"; }
}
check_build misspelt predicted 128 2 -DTUNEBASE_SERVER="$url" -DTUNEBASE_MACHINE=MyBox
warned "$work/misspelt.log" 'tunebase: blocked_sum on MyBox: machine "MyBox" is not registered: '\
'predicted as for a new machine; did you mean "mybox"?'
check_build misspelt-db predicted 128 2 -DTUNEBASE_DB="$db" -DTUNEBASE_EXECUTABLE="$tunebase" \
  -DTUNEBASE_MACHINE=MyBox
warned "$work/misspelt-db.log" "tunebase: blocked_sum on MyBox: machine 'MyBox' is not in $db: "\
"predicting as for a new machine; did you mean 'mybox'?"
# A real (a parameter's value, the objective) is written as the answer has it, the shortest text
# that reads back to the same double: 0.3, not CMake's 0.29999999999999999. Last: this study is
# of another version of the kernel, which the predictions above would learn from.
post /v1/machines '{"name": "real-machine"}' >/dev/null
real=$(post /v1/studies '{"name": "real", "kernel": "blocked_sum", "machine": "real-machine",
  "strategy": "random", "space": {"parameters": [
    {"name": "block_size", "type": "ordinal", "values": [32, 128]},
    {"name": "unroll", "type": "ordinal", "values": [1, 2]},
    {"name": "alpha", "type": "ordinal", "values": [0.1, 0.3]}]}}' |
  sed -n 's/.*"id":\([0-9]*\),"kernel".*/\1/p')
post "/v1/studies/$real/measurements" '{"measurements": [
  {"config": {"block_size": 128, "unroll": 2, "alpha": 0.3}, "value": 0.3}]}' >/dev/null
for how in real real-db; do
  if [ "$how" = real ]; then set -- -DTUNEBASE_SERVER="$url"
  else set -- -DTUNEBASE_DB="$db" -DTUNEBASE_EXECUTABLE="$tunebase"; fi
  check_build "$how" measured 128 2 "$@" -DTUNEBASE_MACHINE=real-machine
  grep -q "^#define BLOCKED_SUM_ALPHA 0.3$" "$work/build-$how/generated/blocked_sum_config.h" ||
    { cat "$work/build-$how/generated/blocked_sum_config.h"; fail "$how: alpha not 0.3"; }
  grep -q "measured best configuration (objective 0.3)" "$work/$how.log" ||
    { cat "$work/$how.log"; fail "$how: objective not 0.3"; }
  # A best of one measured configuration says so, from the server and from the CLI alike.
  warned "$work/$how.log" 'tunebase: blocked_sum on real-machine: only 1 of 8 valid '\
'configurations measured on "real-machine": the best of so few may be far from the best there'
done
stop_server
echo "example_e2e: OK"
