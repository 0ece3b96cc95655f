#!/usr/bin/env bash
# The test command: install what is missing, build (warnings as errors), run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh -DTUNEBASE_WERROR=ON
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
