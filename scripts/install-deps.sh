#!/usr/bin/env bash
# Installs what building and testing libddstore needs on Debian/Ubuntu:
# MPICH, libfabric, libclang (bindgen), CMake, gfortran, pkg-config, valgrind
# (make test-sanitize).
# Idempotent: does nothing when everything is already there.
set -euo pipefail
pkgs=(libfabric-dev libfabric-bin libmpich-dev mpich libclang-dev cmake gfortran g++ pkg-config python3-venv python3-dev valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}"
fi
