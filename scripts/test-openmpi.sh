#!/usr/bin/env bash
# The Open MPI stage of `make test` (`make test-openmpi`): libddstore built
# against Open MPI (MPICC=mpicc.openmpi, its own cargo target directory),
# installed by the CMake install step into its own prefix, then
#   - ldd: the library links libmpi.so.40, not MPICH;
#   - the C, C++ and Fortran core tests through find_package(ddstore), run
#     by mpiexec.openmpi on 1, 2 and 4 ranks, methods 0 and 1;
#   - a staged install (DESTDIR) and its CMake and pkg-config consumers
#     (shared and static), the staged ddstore.pc the same file as the prefix's;
#   - Python: mpi4py built with mpicc.openmpi (in BUILD_DIR/mpi4py, beside the
#     MPICH one of the venv; -O0, in the background while the rest runs),
#     the Python quick start and the core pyddstore
#     tests on 1, 2 and 4 ranks; then both wrong pairings (Open MPI library
#     with MPICH's mpi4py and the reverse) must be refused at dds_create.
# Usage: PYTHON=venv/bin/python MPICH_LIB=.../libddstore.so scripts/test-openmpi.sh BUILD_DIR
#   (make test-openmpi passes build/openmpi, the venv and the MPICH test install)
# Other MPIs (make test-mpis, scripts/mpis/test.sh) use the first part only:
# MPI_CORE_ONLY=1 stops after the C core tests; MPI_NAME, MPI_CC, MPI_CXX,
# MPI_FC (empty: no Fortran), MPI_EXEC, MPI_EXEC_FLAGS, MPI_LIB_RE (the libmpi
# the library must link) and MPI_TESTS (a ctest regex) replace Open MPI 4.1's.
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
# MPI_OMPI_OSC overrides that choice, empty for Open MPI's own (Open MPI 5's
# ucx component refuses UCX_TLS=self,sm, and its own choice works).
if [ -n "${MPI_OMPI_OSC+set}" ]; then
    if [ -n "$MPI_OMPI_OSC" ]; then export OMPI_MCA_osc=$MPI_OMPI_OSC; else unset OMPI_MCA_osc; fi
fi
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
name=${MPI_NAME:-openmpi}
cc=${MPI_CC:-mpicc.openmpi}
cxx=${MPI_CXX:-mpicxx.openmpi}
fc=${MPI_FC-mpif90.openmpi}
exe=${MPI_EXEC:-/usr/bin/mpiexec.openmpi}
read -r -a exe_flags <<< "${MPI_EXEC_FLAGS---oversubscribe}"
lib_re=${MPI_LIB_RE:-'libmpi\.so\.40'}
mpiexec=("$exe" "${exe_flags[@]}")

# Python under Open MPI (the last part): the venv's own mpi4py is MPICH's, so
# an Open MPI one is built once into its own directory and put first on
# PYTHONPATH. It is a test tool, compiled without optimization (CFLAGS=-O0:
# its 13 MB MPI.c took 3-6 minutes of one core at the default -O3, under a
# minute so), and in the background from here, beside the library's build and
# the C tests, which wait mostly on process start-up; the Python part waits
# for it.
mpi4py_pid=
if [ "${MPI_CORE_ONLY:-0}" != 1 ]; then
    PYTHON=${PYTHON:?set PYTHON to a venv python with numpy, pytest, hypothesis and mpi4py}
    MPICH_LIB=${MPICH_LIB:?set MPICH_LIB to the MPICH build of libddstore.so}
    py=$b/mpi4py
    ver=$("$PYTHON" -c 'import mpi4py; print(mpi4py.__version__)')
    if [ ! -f "$py/.built-$ver" ]; then
        rm -rf "$py"
        echo "test-openmpi: building mpi4py $ver with mpicc.openmpi in the background (once)"
        CFLAGS=-O0 MPICC=mpicc.openmpi setsid "$PYTHON" -m pip install --quiet --no-binary mpi4py --no-deps \
            --no-cache-dir --target "$py" "mpi4py==$ver" > "$b/mpi4py-build.log" 2>&1 &
        mpi4py_pid=$!
        # An early exit (a failed test) stops the build (its own process
        # group: pip and its compiler) rather than leave it running.
        # (pip alone if it has not yet made its group.)
        trap '[ -z "$mpi4py_pid" ] || kill -- "-$mpi4py_pid" 2>/dev/null || kill "$mpi4py_pid" 2>/dev/null || true' EXIT
    fi
fi

# A fresh cargo directory for this MPI starts as a copy of the MPICH build's
# (target/release, which make test-c and make install-test-prefix build
# first): only mpi-sys (bindings of this MPI's mpi.h, its C shim built by
# this MPICC) is removed, and it and ddstore (whose build script reruns when
# MPICC changes) are rebuilt; the other crates do not depend on the MPI. The
# ldd check below fails a library that still links another MPI.
if [ ! -d "target/$name/release" ] && [ -d target/release/deps ]; then
    mkdir -p "target/$name"
    cp -a --reflink=auto target/release "target/$name/release"
    cargo clean --release --quiet -p mpi-sys --target-dir "target/$name"
    echo "test-$name: target/$name seeded from target/release (mpi-sys removed)"
fi
make --no-print-directory install PREFIX="$prefix" MPICC="$cc" TARGET_DIR="target/$name" \
    PKG_BUILD="$b/pkg"
# The library links this MPI's libmpi and no other (MPICH's libmpich, Open MPI's libmpi.so.40).
others=$(ldd "$prefix/lib/libddstore.so" | grep -E 'libmpich|libmpi\.so' | grep -Ev "$lib_re" || true)
if ! ldd "$prefix/lib/libddstore.so" | grep -E "$lib_re" >/dev/null || [ -n "$others" ]; then
    echo "test-$name: $prefix/lib/libddstore.so does not link $name's MPI alone:" >&2
    ldd "$prefix/lib/libddstore.so" >&2
    exit 1
fi
echo "test-$name: $(ldd "$prefix/lib/libddstore.so" | grep -E "$lib_re")"

fortran=(-DMPI_Fortran_COMPILER="$fc")
[ -n "$fc" ] || fortran=(-DCMAKE_Fortran_COMPILER=NOTFOUND)
cmake -S capi-tests -B "$b/capi-tests" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMPI_C_COMPILER="$cc" -DMPI_CXX_COMPILER="$cxx" "${fortran[@]}" \
    -DMPIEXEC_EXECUTABLE="$exe" -DMPIEXEC_PREFLAGS="${exe_flags[*]}" > "$b/capi-tests.log"
if [ "${MPI_CORE_ONLY:-0}" = 1 ]; then
    cmake --build "$b/capi-tests" -j 2 --target test_basic test_batch_modes test_requests test_ragged \
        test_node_local >> "$b/capi-tests.log"
    (cd "$b/capi-tests" && ctest --output-on-failure --timeout 300 -R "${MPI_TESTS:?}")
    exit 0
fi
cmake --build "$b/capi-tests" -j 2 >> "$b/capi-tests.log"
# The core tests (not the >2 GiB row, the benchmark, the soak runs or the
# method-2 job pairs); test_fabric_dead and test_request_dead need Hydra's -disable-auto-cleanup.
(cd "$b/capi-tests" && ctest --output-on-failure --timeout 300 \
    -R '^(header|demo|test_basic|test_errors|test_fail_collective|test_collective_mismatch|test_settings|test_boundaries|test_lifecycle|test_cxx|test_fortran|example|test_fabric_np|test_node_local|test_gpu|test_requests_|test_mpi_progress|test_ragged_np)' \
    -E 'np16')

# A staged install (DESTDIR, as a package build does) and its CMake and
# pkg-config consumers (shared and static). The pkg-config consumers run
# there only: the prefix's ddstore.pc is the same file (relocatable), which
# the cmp checks, and the library the same build.
MPICC=mpicc.openmpi MPIEXEC="${mpiexec[*]}" TARGET_DIR=target/openmpi ./scripts/check-staged-install.sh "$b"
cmp "$prefix/lib/pkgconfig/ddstore.pc" "$b/stage/usr/local/lib/pkgconfig/ddstore.pc"

# Python under Open MPI, with the mpi4py built in the background above.
if [ -n "$mpi4py_pid" ]; then
    echo "test-openmpi: waiting for the mpi4py build (log: $b/mpi4py-build.log)"
    if ! wait "$mpi4py_pid"; then
        cat "$b/mpi4py-build.log" >&2
        echo "test-openmpi: building mpi4py $ver with mpicc.openmpi failed" >&2
        exit 1
    fi
    mpi4py_pid=
    touch "$py/.built-$ver"
fi
ompi_py=(env PYTHONPATH="$py:$root/python-ctypes" PYTHONDONTWRITEBYTECODE=1 "$(realpath -s "$PYTHON")")
"${ompi_py[@]}" -c 'import mpi4py.MPI as M, sys; v = M.Get_library_version(); print("test-openmpi: mpi4py uses", v.splitlines()[0]); sys.exit("Open MPI" not in v)'
# The quick start on 1, 2 and 4 ranks; the core pyddstore tests on 2 (all of
# them) and on 1 and 4 (the multi-rank and batch-mode files).
for n in 1 2 4; do
    DDSTORE_LIBRARY=$prefix/lib/libddstore.so "${mpiexec[@]}" -n $n "${ompi_py[@]}" -m mpi4py \
        python-ctypes/tests/scripts/quickstart.py | tail -1
    files=(tests/test_multirank.py tests/test_batch_mode.py)
    [ $n = 2 ] && files+=(tests/test_single.py tests/test_get_batch.py tests/test_node_local.py)
    (cd python-ctypes && DDSTORE_LIBRARY=$prefix/lib/libddstore.so "${mpiexec[@]}" -n $n "${ompi_py[@]}" \
        -m pytest -p no:cacheprovider -q "${files[@]}" | tail -1)
done

# The wrong pairings: each must fail at dds_create, naming both libraries.
DDSTORE_LIBRARY=$prefix/lib/libddstore.so PYTHONPATH="$root/python-ctypes" \
    "$PYTHON" python-ctypes/tests/scripts/mpi_mismatch.py "Open MPI" MPICH
DDSTORE_LIBRARY=$MPICH_LIB "${ompi_py[@]}" python-ctypes/tests/scripts/mpi_mismatch.py MPICH "Open MPI"
echo "test-openmpi: Python under Open MPI and the MPI mismatch checks passed"
