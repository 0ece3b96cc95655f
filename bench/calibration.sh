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
"$bench" --target "$data/convolution_hub/A4000.json.gz" --prior "$data/convolution_hub/A100.json.gz" \
  --train 0 --train 5 --train 20 --seeds "$seeds" 2>/dev/null
"$bench" --target "$data/gemm/A4000.json.gz" --prior "$data/gemm/A100.json.gz" \
  --train 0 --train 5 --train 20 --seeds "$seeds" 2>/dev/null
