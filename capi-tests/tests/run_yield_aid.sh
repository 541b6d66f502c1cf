#!/usr/bin/env bash
# The test aid libdds_test_yield.so (tests/yield_when_idle.c) is really
# loaded into the ranks and stands between MPICH and UCX, and it yields
# exactly when the node has more ranks than cores: test_basic on 1 rank
# (never oversubscribed) and on 4 ranks (oversubscribed on fewer than 4
# cores) with its exit report on. A run whose LD_PRELOAD names the aid but
# whose ranks never reach it (another MPI, a wrapper lost) fails here
# instead of passing silently at the old speed.
#
#   run_yield_aid.sh /path/to/test_basic /path/to/libdds_test_yield.so
set -u
prog=$1 aid=$2
MPIEXEC=${MPIEXEC:-mpiexec}
fail() { echo "run_yield_aid: FAIL: $*"; cat "$log"; exit 1; }
log=$(mktemp "${TMPDIR:-/tmp}/dds-yield-aid.XXXXXX")
trap 'rm -f "$log"' EXIT
[ -f "$aid" ] || { echo "run_yield_aid: FAIL: no $aid"; exit 1; }

for np in 1 4; do
    LD_PRELOAD=$aid DDS_TEST_YIELD_REPORT=1 timeout -k 5 300 "$MPIEXEC" -n "$np" "$prog" >"$log" 2>&1 \
        || fail "test_basic on $np ranks failed under the aid"
    lines=$(grep -c '^dds_test_yield: ' "$log")
    [ "$lines" -eq "$np" ] || fail "$lines report lines for $np ranks: the aid is not loaded in every rank"
    # Each rank: the launcher's rank count, progress calls seen, and yields
    # if and only if the ranks outnumber the cores.
    why=$(awk -v np="$np" '/^dds_test_yield: / {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        over = (f["local_ranks"] > f["cpus"])
        if (f["local_ranks"] != np) { print "local_ranks " f["local_ranks"] ", expected " np; bad = 1 }
        if (f["progress_calls"] == 0) { print "no ucp_worker_progress call went through the aid"; bad = 1 }
        if (f["oversubscribed"] != over) { print "oversubscribed=" f["oversubscribed"] " with " f["cpus"] " cores"; bad = 1 }
        if (over && f["yields"] == 0) { print "oversubscribed but never yielded"; bad = 1 }
        if (!over && f["yields"] != 0) { print "yielded on a node with a core per rank"; bad = 1 }
    } END { exit bad }' "$log") || fail "report of $np ranks: $why"
    echo "$np rank(s): $(grep '^dds_test_yield: ' "$log" | head -1)"
done
echo "run_yield_aid: PASS"
