#!/usr/bin/env bash
# The Open MPI stage of `make test` (`make test-openmpi`): libddstore built
# against Open MPI (MPICC=mpicc.openmpi, its own cargo target directory),
# installed by the CMake install step into its own prefix, then
#   - ldd: the library links libmpi.so.40, not MPICH;
#   - the C, C++ and Fortran core tests through find_package(ddstore), run
#     by mpiexec.openmpi on 1, 2 and 4 ranks, methods 0 and 1;
#   - the pkg-config consumers (shared and static) under Open MPI;
#   - a staged install (DESTDIR) and a CMake consumer of it.
# Usage: scripts/test-openmpi.sh BUILD_DIR   (make test-openmpi passes build/openmpi)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
b=${1:?usage: $0 BUILD_DIR}
mkdir -p "$b"
b=$(cd "$b" && pwd)
prefix=$b/prefix

# Open MPI refuses to run as root without these; its TCP traffic stays on
# loopback. Without UCX-capable devices Open MPI 4.1 picks the "rdma"
# one-sided component, whose shared-memory segments collide for windows of
# split communicators (width groups) and fail MPI_Win_create; "ucx" works
# (docs/install.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_osc=ucx
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
mpiexec=(/usr/bin/mpiexec.openmpi --oversubscribe)

make --no-print-directory install PREFIX="$prefix" MPICC=mpicc.openmpi TARGET_DIR=target/openmpi \
    PKG_BUILD="$b/pkg"
if ! ldd "$prefix/lib/libddstore.so" | grep 'libmpi\.so\.40' >/dev/null \
    || ldd "$prefix/lib/libddstore.so" | grep libmpich >/dev/null; then
    echo "test-openmpi: $prefix/lib/libddstore.so does not link Open MPI alone:" >&2
    ldd "$prefix/lib/libddstore.so" >&2
    exit 1
fi
echo "test-openmpi: $(ldd "$prefix/lib/libddstore.so" | grep libmpi)"

cmake -S capi-tests -B "$b/capi-tests" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMPI_C_COMPILER=mpicc.openmpi -DMPI_CXX_COMPILER=mpicxx.openmpi -DMPI_Fortran_COMPILER=mpif90.openmpi \
    -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.openmpi -DMPIEXEC_PREFLAGS=--oversubscribe > "$b/capi-tests.log"
cmake --build "$b/capi-tests" -j 2 >> "$b/capi-tests.log"
# The core tests (not the >2 GiB row, the benchmark, the soak runs or the
# method-2 job pairs); test_fabric_dead and test_request_dead need Hydra's -disable-auto-cleanup.
(cd "$b/capi-tests" && ctest --output-on-failure --timeout 300 \
    -R '^(header|demo|test_basic|test_errors|test_fail_collective|test_boundaries|test_lifecycle|test_cxx|test_fortran|example|test_fabric_np|test_node_local|test_gpu|test_requests_)' \
    -E 'np16')

MPICC=mpicc.openmpi MPIEXEC="${mpiexec[*]}" ./scripts/check-pkgconfig.sh "$prefix"

# A staged install (as a package build does), then a CMake consumer of it.
stage=$b/stage
rm -rf "$stage"
make --no-print-directory install DESTDIR="$stage" PREFIX=/opt/ddstore MPICC=mpicc.openmpi \
    TARGET_DIR=target/openmpi PKG_BUILD="$b/pkg-staged"
test -f "$stage/opt/ddstore/lib/libddstore.so.0" && test -f "$stage/opt/ddstore/lib/cmake/ddstore/ddstoreConfig.cmake" \
    || { echo "test-openmpi: DESTDIR install is incomplete" >&2; find "$stage" >&2; exit 1; }
cmake -S capi-tests -B "$b/consumer" -DCMAKE_PREFIX_PATH="$stage/opt/ddstore" -DCMAKE_BUILD_TYPE=Release \
    -DMPI_C_COMPILER=mpicc.openmpi -DMPI_CXX_COMPILER=mpicxx.openmpi -DMPI_Fortran_COMPILER=mpif90.openmpi \
    > "$b/consumer.log"
cmake --build "$b/consumer" -j 2 --target demo >> "$b/consumer.log"
"${mpiexec[@]}" -n 2 "$b/consumer/demo" | tail -1
echo "test-openmpi: staged install and its CMake consumer: 1 passed, 0 failed"
