#!/usr/bin/env bash
# Tuning quality on fully measured GPU tuning spaces (simulation mode), the figures issues 3 and
# 4 ask for: `tunebase benchmark` with budget 100 and 20 seeds, random search beside every
# strategy. Writes JSON (and SVG plots) to $OUT (default ./quality).
#   BUILD=build TUNEBASE_SHARED_DATA=../shared/data OUT=quality bash bench/tuning_quality.sh
# With the argument `all`: bo against random on every measured space instead (Kernel Tuner
# cache files; the T4 twins hold the same measurements), about 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
data=${TUNEBASE_SHARED_DATA:-../shared/data}/gpu
out=${OUT:-quality}
mkdir -p "$out"
tb="$build/apps/tunebase"
[ -f "$data/gemm/A100.json.gz" ] || { echo "no $data/gemm/A100.json.gz: set TUNEBASE_SHARED_DATA"; exit 1; }

bench() {  # bench NAME args...: one tunebase benchmark run, its table printed
  local name=$1
  shift
  echo
  echo "\$ tunebase benchmark $* --budget 100 --seeds 20 --json $out/$name.json --svg $out/$name.svg"
  "$tb" benchmark "$@" --budget 100 --seeds 20 --json "$out/$name.json" --svg "$out/$name.svg"
}

if [ "${1:-}" = all ]; then
  echo "== bo against random search on every measured space"
  for file in "$data"/*/*.json.gz; do
    case $file in *_T4.json.gz) continue ;; esac
    name=$(basename "$(dirname "$file")")_$(basename "$file" .json.gz)
    bench "$name" --target "$file" --strategy bo --jobs 2
  done
  exit 0
fi

echo "== issue 3: bo against random search"
bench gemm_A100 --target "$data/gemm/A100.json.gz" --strategy bo
bench convolution_A100 --target "$data/convolution/A100.json.gz" --strategy bo
bench convolution_hub_A4000 --target "$data/convolution_hub/A4000.json.gz" --strategy bo

echo
echo "== issue 4: transfer strategies (bo-transfer, rgpe, stacked, prior-best) against bo and random"
bench gemm_A100_from_V100_P100 --target "$data/gemm/A100.json.gz" \
  --prior "$data/gemm/V100.json.gz" --prior "$data/gemm/P100.json.gz"
bench gemm_A100_from_K20 --target "$data/gemm/A100.json.gz" --prior "$data/gemm/K20.json.gz"
bench convolution_hub_A4000_from_A100 --target "$data/convolution_hub/A4000.json.gz" \
  --prior "$data/convolution_hub/A100.json.gz"

echo
echo "== issue 4, no harm: every other single prior of the same targets, bo-transfer"
for gpu in V100 P100 GTX1080Ti; do
  bench "gemm_A100_from_$gpu" --target "$data/gemm/A100.json.gz" \
    --prior "$data/gemm/$gpu.json.gz" --strategy bo-transfer
done
bench convolution_hub_A4000_from_A6000 --target "$data/convolution_hub/A4000.json.gz" \
  --prior "$data/convolution_hub/A6000.json.gz" --strategy bo-transfer
