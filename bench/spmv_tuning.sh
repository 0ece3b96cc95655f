#!/usr/bin/env bash
# Tuned versus default SpMV on this machine, next to its memory bandwidth (the physical limit
# of SpMV): the STREAM-like triad of bench_stream, then a tunebase sweep on bayer10 (from the
# shared data) and on a generated 3D Laplacian of 1,000,000 rows. Run on a quiet machine.
#   BUILD=build BUDGET=60 TUNEBASE_SHARED_DATA=../shared/data bash bench/spmv_tuning.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
budget=${BUDGET:-60}
data=${TUNEBASE_SHARED_DATA:-../shared/data}
db=$(mktemp -d)/spmv_tuning.db
trap 'rm -rf "$(dirname "$db")"' EXIT

echo "== memory bandwidth (triad a = b + s c)"
"$build/bench/bench_stream" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_display_aggregates_only=true 2>&1 | grep -E "median|Benchmark"

if [ -f "$data/matrices/bayer10.mtx" ]; then
  echo "== bayer10 (budget $budget)"
  "$build/apps/tunebase" sweep --kernel spmv --matrix "$data/matrices/bayer10.mtx" \
    --budget "$budget" --db "$db" --no-progress
else
  echo "== bayer10 skipped: $data/matrices/bayer10.mtx not found (set TUNEBASE_SHARED_DATA)"
fi
echo "== 3D Laplacian, 100^3 = 1,000,000 rows (budget $budget)"
"$build/apps/tunebase" sweep --kernel spmv --problem laplacian3d --size 100 \
  --budget "$budget" --db "$db" --no-progress
