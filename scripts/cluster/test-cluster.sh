#!/usr/bin/env bash
# make test-cluster: the library across simulated nodes (docs/cluster.md).
#
#   scripts/cluster/test-cluster.sh [PARTS]     PARTS default: "c python slurm"
#   CLUSTER_SIZES="2" scripts/cluster/test-cluster.sh c   only the 2-node cluster
#   scripts/cluster/test-cluster.sh bench [BENCH ARGS]    make bench-cluster: the
#       2-rank C benchmark with one rank on each of 2 nodes (scripts/cluster/bench.sh)
#
# Installs what it needs (Debian's slurm-wlm and munge; MPICH 5 from PyPI in
# build/mpis/mpich, by scripts/mpis/install.sh as make test-mpis does), builds the library against that MPICH
# (target/mpich5, installed in build/cluster/prefix), the C test programs and
# a Python venv with mpi4py for it (build/cluster/venv), then runs
# scripts/cluster/suite.sh on 2 nodes x 2 ranks and on 4 nodes x 2 ranks,
# each cluster with Slurm up. Needs root and Linux namespaces; without them
# it SKIPS, loudly, and leaves build/cluster/SKIPPED for make test's summary.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
B=$ROOT/build/cluster
PARTS=${1:-c python slurm}
BENCH=0
if [ "$PARTS" = bench ]; then BENCH=1; shift; fi
MPICH5=$ROOT/build/mpis/mpich
PY_BASE=${CLUSTER_PYTHON:-python3}
mkdir -p "$B"
rm -f "$B/SKIPPED"
t_start=$SECONDS

skip() {
    echo "$*" > "$B/SKIPPED"
    echo
    echo "##################################################################"
    echo "##  make test-cluster SKIPPED: $*"
    echo "##  (the multi-node stage needs root and Linux namespaces)"
    echo "##################################################################"
    echo
    exit 0
}
die() { echo "test-cluster: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || skip "not root"
command -v unshare > /dev/null && command -v nsenter > /dev/null || skip "no unshare/nsenter (util-linux)"
command -v ip > /dev/null || skip "no ip (iproute2)"
unshare --net --uts --ipc --mount --fork true 2> /dev/null || skip "cannot create namespaces here"
unshare --net --fork sh -c 'ip link add ddsnt0 type veth peer name ddsnt1 && ip link add ddsntb type bridge' \
    2> /dev/null || skip "cannot create veth pairs or bridges in a namespace"

# Debian's Slurm and munge, and ping (cluster.sh checks the bridge with it).
need=()
for p in slurmctld:slurm-wlm slurmd:slurm-wlm munged:munge ping:iputils-ping; do
    command -v "${p%%:*}" > /dev/null || need+=("${p#*:}")
done
if ((${#need[@]})); then
    echo "test-cluster: installing ${need[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${need[@]}"; } > "$B/apt.log" 2>&1 || { tail -20 "$B/apt.log"; die "could not install ${need[*]}"; }
fi

# MPICH 5 from PyPI: MPICH 4.0.2 (Debian 12's) often hangs in MPI_Finalize
# over UCX's TCP transport, fixed upstream in 2023.
# The same pinned wheel as make test-mpis, so the cargo build in
# target/mpich5 is shared between the two stages.
./scripts/mpis/install.sh "$ROOT/build/mpis" mpich || die "cannot install MPICH 5 from PyPI"
# Programs link libmpi, which needs the libfabric MPICH bundles.
export LD_LIBRARY_PATH=$MPICH5/lib/mpich${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "test-cluster: building the library against $("$MPICH5/bin/mpichversion" | sed -n 1p | tr -s ' ')"
make --no-print-directory install MPICC="$MPICH5/bin/mpicc" TARGET_DIR=target/mpich5 PREFIX="$B/prefix" \
    PKG_BUILD="$B/pkg" > "$B/build.log" 2>&1 || { tail -30 "$B/build.log"; die "library build failed"; }
BIN=$B/bin
mkdir -p "$BIN"
for t in test_basic test_errors test_node_local test_fabric test_requests test_ragged test_batch_modes test_split \
    test_mpi_progress; do
    "$MPICH5/bin/mpicc" -O2 -g -Wall -I"$B/prefix/include" -Icapi-tests/tests "capi-tests/tests/$t.c" -o "$BIN/$t" \
        -L"$B/prefix/lib" -lddstore -Wl,-rpath,"$B/prefix/lib" -Wl,-rpath-link,"$MPICH5/lib/mpich" -pthread \
        || die "cannot build $t"
done
"$MPICH5/bin/mpicc" -O2 -Wall scripts/cluster/split_type.c -o "$BIN/split_type" || die "cannot build split_type"
# Open MPI's launcher through the same nodeexec (Debian's Open MPI, from make deps).
if command -v mpicc.openmpi > /dev/null; then
    mpicc.openmpi -O2 -Wall scripts/cluster/split_type.c -o "$BIN/split_type_openmpi" || die "cannot build split_type (Open MPI)"
fi

if [ "$BENCH" = 1 ]; then
    "$MPICH5/bin/mpicc" -O2 -g -I"$B/prefix/include" -Icapi-tests/bench capi-tests/bench/bench.c capi-tests/bench/harness.c \
        capi-tests/bench/bench_floors.c capi-tests/bench/bench_fabric.c capi-tests/bench/bench_mem.c \
        capi-tests/bench/bench_overlap.c capi-tests/bench/bench_ragged.c \
        -o "$BIN/bench" -L"$B/prefix/lib" -lddstore -Wl,-rpath,"$B/prefix/lib" \
        -Wl,-rpath-link,"$MPICH5/lib/mpich" -L"$MPICH5/lib/mpich" -l:libfabric.so.1 -pthread -lm \
        || die "cannot build the bench"   # its raw fi_read floors: the libfabric MPICH bundles
    mkdir -p build/bench
    export MPICH5 BIN ROOT
    echo "test-cluster: bench across 2 nodes, records in build/bench/cluster.jsonl"
    exec scripts/cluster/cluster.sh run 2 -- scripts/cluster/bench.sh "$ROOT/build/bench/cluster.jsonl" "$@"
fi

# Python: mpi4py built from source against MPICH 5, in a venv of its own
# (a test tool: without optimization, CFLAGS=-O0, as test-openmpi.sh builds
# its own, which takes its compile from minutes to well under one).
# torch is large: taken from the project's venv (VENV) through a .pth line,
# which comes after this venv's own packages, so its mpi4py (built for the
# system MPICH) is never the one imported.
VENVC=$B/venv
PYTHON=$VENVC/bin/python
case " $PARTS " in *" python "*|*" slurm "*)
    if [ ! -f "$VENVC/.mpi4py-mpich5" ]; then
        echo "test-cluster: building $VENVC (mpi4py for MPICH 5; a few minutes)"
        { "$PY_BASE" -m venv "$VENVC" && "$VENVC/bin/pip" install --quiet numpy pytest hypothesis cffi wheel &&
          CFLAGS=-O0 MPICC="$MPICH5/bin/mpicc" "$VENVC/bin/pip" install --quiet --no-binary mpi4py --no-cache-dir \
              mpi4py; } \
            > "$B/venv.log" 2>&1 || { tail -20 "$B/venv.log"; die "cannot build $VENVC"; }
        touch "$VENVC/.mpi4py-mpich5"
    fi
    site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if ! "$PYTHON" -c 'import torch' 2> /dev/null; then
        tsite=$(ls -d "${VENV:-$ROOT/.venv}"/lib/python3*/site-packages 2> /dev/null | sed -n 1p)
        [ -n "$tsite" ] && [ -d "$tsite/torch" ] || die "no torch in ${VENV:-$ROOT/.venv} (make's venv installs it)"
        echo "$tsite" > "$site/zz-project-venv-torch.pth"
    fi
    "$PYTHON" -c 'import torch' || die "$PYTHON: no torch"
    mpi_ext=$("$PYTHON" -c 'import importlib.util as u; print(u.find_spec("mpi4py.MPI").origin)') \
        || die "$PYTHON: no mpi4py"
    # ldd's output whole before matching (`ldd | grep -q` under pipefail can
    # fail on ldd's SIGPIPE).
    mpi_ext_deps=$(ldd "$mpi_ext")
    grep -qF "$MPICH5/lib/libmpi" <<<"$mpi_ext_deps" || die "$mpi_ext is not built for MPICH 5 ($MPICH5)"
    "$PYTHON" python-ctypes/pyddstore/_ffi_build.py python-ctypes > /dev/null || die "cannot generate the cffi module"
esac
export MPICH5 BIN PYTHON ROOT DDSTORE_LIBRARY=$B/prefix/lib/libddstore.so
echo "test-cluster: set-up took $((SECONDS - t_start)) s"

rc=0
summary=()
for n in ${CLUSTER_SIZES:-2 4}; do
    t0=$SECONDS
    if scripts/cluster/cluster.sh run "$n" --slurm -- scripts/cluster/suite.sh $PARTS; then
        summary+=("$n nodes x 2 ranks: passed ($((SECONDS - t0)) s)")
    else
        summary+=("$n nodes x 2 ranks: FAILED ($((SECONDS - t0)) s)")
        rc=1
    fi
done
scripts/cluster/cluster.sh check || rc=1
echo "=== test-cluster summary (MPICH 5 from PyPI; hydra via nodeexec and Slurm srun --mpi=pmi2)"
printf '    %s\n' "${summary[@]}"
echo "=== test-cluster $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t_start)) s"
exit $rc
