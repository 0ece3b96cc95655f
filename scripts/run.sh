#!/usr/bin/env bash
# The main job: install what is missing, build, tune SpMV on this machine for real (a
# generated 3D Laplacian, or the Matrix Market file given as $1), store every trial in
# tunebase.db, show what was found, then serve it all over HTTP on that database (Ctrl-C
# stops the server). TUNEBASE_SERVE=0 skips the server; TUNEBASE_PORT picks its port (8080).
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

if [ "${TUNEBASE_SERVE:-1}" != "0" ]; then
  port=${TUNEBASE_PORT:-8080}
  echo
  echo "Serving $db on http://127.0.0.1:$port (Ctrl-C stops it). Try, from another terminal:"
  echo "  curl 'http://127.0.0.1:$port/v1/best?kernel=spmv&machine=$(hostname)'"
  echo "  curl http://127.0.0.1:$port/v1/studies"
  echo "  curl http://127.0.0.1:$port/metrics"
  echo "Writes need a token: ./build/apps/tunebase token create me --db $db"
  exec ./build/apps/tunebase serve --db "$db" --port "$port"
fi
