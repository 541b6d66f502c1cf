#!/usr/bin/env bash
# The cases of the multi-node stage (make test-cluster), run by
# test-cluster.sh inside the head node of a simulated cluster
# (cluster.sh run N --slurm -- suite.sh PARTS...). PARTS: c, python, slurm.
# Every case is a real MPI job across the nodes (2 ranks per node) whose
# programs check every row they read; each runs under a time-out and is
# reported with its time. Exits non-zero if any case failed.
#
# Environment (from test-cluster.sh): MPICH5 (its prefix), BIN (the C test
# programs), PYTHON (a venv with mpi4py built for MPICH5), ROOT (the
# repository), plus what cluster.sh sets (CLUSTER_NODES, CLUSTER_N, CLUSTER_EXEC).
set -u
cd "$ROOT"
T=${CLUSTER_CASE_TIMEOUT:-180}
LOGS=$CLUSTER_DIR/logs
mkdir -p "$LOGS"
read -r -a NODES <<< "$CLUSTER_NODES"
N=${#NODES[@]}
failed=()
passed=0

source "$ROOT/scripts/cluster/env.sh"
# The test venv's python first (MPICH 5's prefix is a venv of its own).
export PATH=$(dirname "$PYTHON"):$PATH
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$ROOT/python-ctypes   # pyddstore from this tree

# case NAME CMD...: runs CMD under the time-out; its output goes to a log,
# shown on failure.
case_() {
    local name=$1; shift
    local log
    log=$LOGS/$(echo "$name" | tr -c 'A-Za-z0-9_.=-' '_').log
    local t0=$SECONDS rc=0
    timeout -k 10 "$T" bash -c '"$@"' case "$@" > "$log" 2>&1 || rc=$?
    if [ "$rc" = 0 ]; then
        passed=$((passed + 1))
        printf 'ok   %-72s %3ds\n' "$name" $((SECONDS - t0))
    else
        failed+=("$name")
        printf 'FAIL %-72s %3ds (exit %s)\n' "$name" $((SECONDS - t0)) "$rc"
        tail -n 25 "$log" | sed 's/^/    | /'
    fi
}

# c_case NAME-SUFFIX ENV... -- PROG ARGS: a C test on every node, 2 ranks each.
c_case() {
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local prog=$1; shift
    case_ "C $N x 2: $prog ${envs[*]}" mpx 0 "$N" 2 env "${envs[@]}" "$BIN/$prog" "$@"
}

# Method 2 with the core and the extra as separate launches on different
# nodes: the core on the first half, the extra job on the other half.
split_case() {
    local prov=$1 half=$((N / 2)) hs
    hs=$(mktemp -d "$CLUSTER_DIR/hs.XXXXXX")
    local name="C method 2 ($prov): core on ${NODES[*]:0:$half}, extra on ${NODES[*]:$half}"
    case_ "$name" bash -c '
        export DDSTORE_FABRIC=$1 DDSTORE_HANDSHAKE_DIR=$2 DDSTORE_HANDSHAKE_TIMEOUT_S=60 SPLIT_N_CORE=$(($3 * 2))
        # Each extra rank is an extra store: the core waits for all of them.
        mpx 0 "$3" 2 "$BIN/test_split" core $(($3 * 2)) & core=$!
        mpx "$3" "$3" 2 "$BIN/test_split" extra; e=$?
        wait $core; c=$?
        echo "extra exit $e, core exit $c"; [ $e = 0 ] && [ $c = 0 ]' \
        split "$prov" "$hs" "$half"
    rm -rf "$hs"
}

part_c() {
    echo "== C tests, $N nodes x 2 ranks (MPICH $(mpichversion | sed -n 's/MPICH Version: *//p'), hydra through nodeexec)"
    case_ "split_type: MPI_Comm_split_type(SHARED) groups ranks by node" mpx 0 "$N" 2 "$BIN/split_type" "$N"
    if [ -x "$BIN/split_type_openmpi" ]; then
        # Open MPI's rsh agent is nodeexec too; its daemons' and ranks' TCP on eth0.
        case_ "split_type under Open MPI $(mpiexec.openmpi --version | sed -n '1s/.* //p') (plm_rsh_agent nodeexec)" \
            mpiexec.openmpi --allow-run-as-root --mca plm_rsh_agent "$CLUSTER_EXEC" --host "$(hosts 0 "$N" 2)" \
            -n $((N * 2)) --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 "$BIN/split_type_openmpi" "$N"
    fi
    if [ "$N" = 2 ]; then
        # Method 0: node-local on and off, both batch modes and exchanges.
        c_case -- test_basic
        c_case DDSTORE_NODE_LOCAL=0 -- test_basic
        c_case DDSTORE_NODE_LOCAL=0 DDSTORE_BATCH_EXCHANGE=alltoallv -- test_basic
        c_case DDSTORE_NODE_LOCAL=0 DDSTORE_BATCH_EXCHANGE=sendrecv -- test_basic
        c_case DDSTORE_BATCH_MODE=onesided -- test_basic
        c_case DDSTORE_BATCH_MODE=onesided DDSTORE_NODE_LOCAL=0 -- test_basic
        c_case DDSTORE_NODE_LOCAL=0 -- test_errors
        c_case -- test_node_local
        c_case DDSTORE_NODE_LOCAL=0 -- test_node_local
        c_case DDSTORE_BATCH_MODE=onesided -- test_node_local
        c_case DDSTORE_NODE_LOCAL=1 -- test_batch_modes
        c_case DDSTORE_NODE_LOCAL=0 -- test_batch_modes
        # DDSTORE_MPI_PROGRESS unset (auto): the thread runs because the store
        # spans nodes, and rank 0 reads rank 1's rows while rank 1 makes no MPI
        # call (one rank per node: rank 1 is on the other node).
        case_ "C $N x 1: test_mpi_progress (auto), one-sided batches" mpx 0 "$N" 1 "$BIN/test_mpi_progress"
        case_ "C $N x 1: test_mpi_progress (auto), collective mode" mpx 0 "$N" 1 "$BIN/test_mpi_progress" collective
        c_case DDSTORE_NODE_LOCAL=0 -- test_mpi_progress
        # Method 1 over libfabric's tcp provider on the veths.
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp -- test_basic
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 -- test_basic
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 -- test_errors
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp -- test_node_local
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 -- test_node_local
        c_case DDSTORE_FABRIC=tcp -- test_fabric
        # Method 2: core members, and a core and an extra job on different nodes.
        c_case DDS_TEST_METHOD=2 DDSTORE_FABRIC=tcp DDSTORE_HANDSHAKE_DIR="$CLUSTER_DIR/hs-core" -- test_basic
        split_case tcp
        # Requests (non-blocking batches) and ragged variables.
        c_case DDSTORE_NODE_LOCAL=0 -- test_requests
        c_case DDSTORE_NODE_LOCAL=1 DDSTORE_BATCH_MODE=onesided -- test_requests
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 -- test_requests
        c_case -- test_ragged
        c_case DDSTORE_NODE_LOCAL=0 DDSTORE_BATCH_MODE=onesided -- test_ragged
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 -- test_ragged
    else
        # The subset on more nodes.
        c_case -- test_basic
        c_case DDSTORE_BATCH_MODE=onesided DDSTORE_NODE_LOCAL=0 -- test_basic
        c_case DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp -- test_basic
        c_case -- test_node_local
        c_case DDSTORE_NODE_LOCAL=0 DDSTORE_BATCH_MODE=onesided -- test_requests
        split_case tcp
    fi
}

part_python() {
    [ "$N" = 2 ] || return 0   # 4 nodes: the Python jobs run under Slurm (part_slurm)
    echo "== Python, $N nodes x 2 ranks"
    local py=python-ctypes
    if [ "$N" = 2 ]; then
        case_ "pytest $N x 2: multirank, get_batch, batch_mode, node_local" \
            mpx 0 "$N" 2 "$PYTHON" -m pytest -p no:cacheprovider -q \
            $py/tests/test_multirank.py $py/tests/test_get_batch.py $py/tests/test_batch_mode.py \
            $py/tests/test_node_local.py
        case_ "quickstart.py $N x 2 (python -m mpi4py)" mpx 0 "$N" 2 "$PYTHON" -m mpi4py $py/tests/scripts/quickstart.py
        local m
        for m in 0 1; do
            case_ "hydragnn_style.py $N x 2, method $m" \
                mpx 0 "$N" 2 env HYDRAGNN_DDSTORE_METHOD=$m "$PYTHON" $py/tests/scripts/hydragnn_style.py
        done
    fi
    if [ "$N" = 2 ]; then
        # Method 0's one-sided loader reads across nodes need the owners' MPI
        # progress: DDSTORE_MPI_PROGRESS's default (auto) turns the thread on
        # for a store that spans nodes; without it this job hung in its first
        # step (docs/pytorch.md).
        case_ "torch_quickstart.py $N x 2, method 0 (DDSTORE_MPI_PROGRESS unset: auto)" \
            mpx 0 "$N" 2 env -u DDSTORE_MPI_PROGRESS DDSTORE_METHOD=0 MASTER_ADDR="${NODES[0]}" MASTER_PORT=29500 \
            "$PYTHON" $py/tests/scripts/torch_quickstart.py
        case_ "torch_quickstart.py $N x 2, method 1" \
            mpx 0 "$N" 2 env DDSTORE_METHOD=1 DDSTORE_FABRIC=tcp MASTER_ADDR="${NODES[0]}" MASTER_PORT=29501 \
            "$PYTHON" $py/tests/scripts/torch_quickstart.py
    fi
}

part_slurm() {
    echo "== Slurm ($(srun --version)), the job scripts of examples/slurm as shipped, $N nodes"
    local ex=$ROOT/examples/slurm
    # sbatch_case NAME SCRIPT SBATCH-ARGS...: submits, waits, checks the state and the output.
    sbatch_case() {
        local name=$1 script=$2; shift 2
        case_ "slurm $N nodes: $name" bash -c '
            out=$1; shift
            id=$(sbatch --parsable --wait -o "$out" "$@") || { rc=$?; cat "$out"; echo "sbatch exit $rc"; exit 1; }
            cat "$out"
            grep -q "^JOB PASSED" "$out"' sbatch "$LOGS/slurm-$(basename "$script" .sbatch)-$N.out" "$@" "$script"
    }
    sbatch_case "quickstart.sbatch (srun --mpi=pmi2 python -m mpi4py)" "$ex/quickstart.sbatch" -N "$N"
    if [ "$N" = 2 ]; then
        sbatch_case "torch_quickstart.sbatch" "$ex/torch_quickstart.sbatch" -N "$N"
    fi
    sbatch_case "method2_split_node.sbatch (core and extra steps on different nodes)" \
        "$ex/method2_split_node.sbatch" -N "$N"
    sbatch_case "method2_overlap.sbatch (core and extra steps on the same nodes, --overlap)" \
        "$ex/method2_overlap.sbatch" -N "$N"
    if [ "$N" = 2 ]; then
        sbatch_case "steps.sbatch (steps one after another)" "$ex/steps.sbatch" -N "$N"
    fi
}

for part in "$@"; do "part_$part"; done
echo "== $N nodes: $passed passed, ${#failed[@]} failed"
if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
fi
