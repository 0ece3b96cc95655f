#!/usr/bin/env bash
# Configures and builds tunebase (Release) in ./build. Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j"$(nproc)"
