#!/usr/bin/env bash
# The main job: install what is missing, build, tune SpMV on this machine for real (a
# generated 3D Laplacian, or the Matrix Market file given as $1), store every trial in
# tunebase.db, and show what was found.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
db=${TUNEBASE_DB:-tunebase.db}
budget=${TUNEBASE_BUDGET:-30}
if [ $# -ge 1 ]; then
  ./build/apps/tunebase sweep --kernel spmv --matrix "$1" --budget "$budget" --db "$db"
else
  ./build/apps/tunebase sweep --kernel spmv --problem laplacian3d --size 100 --budget "$budget" --db "$db"
fi
./build/apps/tunebase studies --db "$db"
./build/apps/tunebase best --kernel spmv --db "$db"
