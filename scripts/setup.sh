#!/usr/bin/env bash
# Installs the Debian packages tunebase needs, only those missing (idempotent: installs
# nothing when everything is present). Runs as root or through sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libdlib-dev libopenblas-dev liblapack-dev
  libsqlite3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  ocl-icd-opencl-dev pocl-opencl-icd opencl-clhpp-headers clinfo
  petsc-dev
  wrk curl
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
