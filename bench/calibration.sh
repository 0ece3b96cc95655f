#!/usr/bin/env bash
# Calibration of predictions (docs/benchmarks.md, "Calibration of predictions"): bench_calibration
# on the fully measured GPU spaces, without priors (random and bo-picked measurements) and with
# another machine's measurements as priors (what a build system gets at configure time).
#   bash bench/calibration.sh [build dir] [data dir] [seeds]
set -euo pipefail
build=${1:-build}
data=${2:-../shared/data/gpu}
seeds=${3:-5}
bench="$build/bench/bench_calibration"
for target in gemm/A100 gemm/K20 convolution/V100 convolution_hub/A4000 dedispersion/A6000; do
  "$bench" --target "$data/$target.json.gz" --seeds "$seeds" 2>/dev/null
done
for target in gemm/A100 convolution_hub/A4000; do
  "$bench" --target "$data/$target.json.gz" --seeds "$seeds" --sample bo --train 10 --train 20 \
    --train 50 2>/dev/null
done
for pair in convolution_hub/A4000:convolution_hub/A100 dedispersion/A4000:dedispersion/A100 \
  gemm/V100:gemm/A100; do
  "$bench" --target "$data/${pair%%:*}.json.gz" --prior "$data/${pair##*:}.json.gz" \
    --train 0 --train 5 --train 20 --seeds "$seeds" 2>/dev/null
done
