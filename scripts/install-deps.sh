#!/usr/bin/env bash
# Installs what building and testing libddstore needs on Debian/Ubuntu:
# MPICH, libfabric, libclang (bindgen), CMake, gfortran, pkg-config, valgrind
# (make test-sanitize), Open MPI beside MPICH (make test-openmpi), and the
# HIP headers and runtime (make test-rocm builds the `rocm` feature), ip and
# ping (make test-netns checks its veth link with ping before it runs).
#
# Debian's update-alternatives would make Open MPI the default mpicc,
# mpiexec and libmpi.so once it is installed (it has the higher priority):
# MPICH stays the default here, and Open MPI is used only when named
# (mpicc.openmpi, mpiexec.openmpi).
# Idempotent: does nothing when everything is already there.
set -euo pipefail
pkgs=(libfabric-dev libfabric-bin binutils libmpich-dev mpich libclang-dev cmake gfortran g++ pkg-config python3-venv python3-dev valgrind
      libopenmpi-dev openmpi-bin libamdhip64-dev iproute2 iputils-ping)
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
# Pin MPICH (a no-op when it already is the choice).
pin() {
  local name=$1 want=$2
  [ -e "$want" ] || return 0
  [ "$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')" = "$want" ] && return 0
  ${sudo_cmd:-} update-alternatives --set "$name" "$want"
}
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
pin mpi /usr/bin/mpicc.mpich
pin mpirun /usr/bin/mpirun.mpich
pin mpi-"$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)" \
    /usr/include/"$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"/mpich
