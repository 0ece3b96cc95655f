#!/usr/bin/env bash
# Formats every C++ and CUDA source with the root .clang-format (clang-format from Debian's
# clang-format package). --check: change nothing, list the files that differ, exit 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
if [ "${1:-}" = "--check" ]; then
  differ=0
  for f in "${files[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then echo "$f"; differ=1; fi
  done
  exit $differ
fi
clang-format -i "${files[@]}"
