#!/usr/bin/env bash
# A staged install, as a distribution package build does it:
#   make install DESTDIR=STAGE PREFIX=/usr/local
# must put the whole tree under STAGE/usr/local (nothing outside it); then a
# CMake consumer (find_package(ddstore)) and the pkg-config consumers
# (shared and static) build and run against the staged tree, which works
# because the CMake package and ddstore.pc are relocatable.
# Usage: [MPICC=mpicc.openmpi MPIEXEC="mpiexec.openmpi --oversubscribe" TARGET_DIR=target/openmpi]
#        scripts/check-staged-install.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
b=${1:?usage: $0 BUILD_DIR}
mkdir -p "$b"
b=$(cd "$b" && pwd)
mpicc=${MPICC:-mpicc}
mpiexec=${MPIEXEC:-mpiexec}
stage=$b/stage
rm -rf "$stage"
make --no-print-directory install DESTDIR="$stage" PREFIX=/usr/local MPICC="$mpicc" \
    TARGET_DIR="${TARGET_DIR:-target}" PKG_BUILD="$b/pkg-staged" > "$b/staged-install.log"
for f in lib/libddstore.so.0 lib/libddstore.a include/ddstore.h lib/cmake/ddstore/ddstoreConfig.cmake \
    lib/cmake/ddstore/ddstoreConfigVersion.cmake lib/pkgconfig/ddstore.pc; do
    test -e "$stage/usr/local/$f" || { echo "check-staged-install: $stage/usr/local/$f is missing" >&2; exit 1; }
done
outside=$(find "$stage" -mindepth 1 -not -path "$stage/usr" -not -path "$stage/usr/local" -not -path "$stage/usr/local/*")
if [ -n "$outside" ]; then
    echo "check-staged-install: files outside the prefix: $outside" >&2
    exit 1
fi
# The MPI wrappers of the same family as MPICC (mpicc.openmpi -> mpicxx.openmpi).
suffix=${mpicc#mpicc}
cmake -S capi-tests -B "$b/staged-consumer" -DCMAKE_PREFIX_PATH="$stage/usr/local" -DCMAKE_BUILD_TYPE=Release \
    -DMPI_C_COMPILER="$mpicc" -DMPI_CXX_COMPILER="mpicxx$suffix" -DMPI_Fortran_COMPILER="mpif90$suffix" \
    > "$b/staged-consumer.log"
cmake --build "$b/staged-consumer" -j 2 --target demo >> "$b/staged-consumer.log"
# shellcheck disable=SC2086
$mpiexec -n 2 "$b/staged-consumer/demo" | tail -1
MPICC="$mpicc" MPIEXEC="$mpiexec" ./scripts/check-pkgconfig.sh "$stage/usr/local"
echo "check-staged-install ($mpicc): staged tree, CMake and pkg-config consumers: 3 passed, 0 failed"
