#!/usr/bin/env bash
# No node-local segment outlives a killed rank (issue 35, item 3; see
# docs/node-local.md): a 2-rank job is killed (SIGKILL of one rank, then
# mpiexec ends the other) while both are inside dds_add, in the window in
# which their segments still have names (held open by the testing aid
# DDSTORE_TEST_SEGMENT_DELAY_S). The segments are left behind (checked, so
# the test reaches the window); the next dds_create on the node removes
# them; nothing named after the killed job's processes is left in /dev/shm.
# The segments go to a private directory on /dev/shm's tmpfs
# (DDSTORE_SHM_DIR): any other job of this user on the node that makes a
# store would otherwise remove the killed job's segments before this script
# looks (the cleanup under test), and the test would miss them.
#
#   run_shm_crash.sh /path/to/test_shm_crash
set -u
prog=$1
MPIEXEC=${MPIEXEC:-mpiexec}
shm=$(mktemp -d "${DEV_SHM:-/dev/shm}/dds-shm-crash.XXXXXX") || { echo "run_shm_crash: FAIL: no private directory"; exit 1; }
export DDSTORE_SHM_DIR=$shm
export FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_TLS=self,sm DDSTORE_NODE_LOCAL=1
log=$(mktemp "${TMPDIR:-/tmp}/dds-shm-crash.XXXXXX")
trap 'rm -f "$log"; rm -rf "$shm"' EXIT
fail() { echo "run_shm_crash: FAIL: $*"; cat "$log"; exit 1; }

DDSTORE_TEST_SEGMENT_DELAY_S=5 timeout -k 5 60 "$MPIEXEC" -n 2 "$prog" crash >"$log" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "the job survived the kill"
[ "$rc" -ne 124 ] || fail "the job hung after the kill"
pids=$(sed -n 's/^pid [0-9]* \([0-9]*\)$/\1/p' "$log")
[ "$(echo "$pids" | wc -w)" -eq 2 ] || fail "expected two pids"
for p in $pids; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && fail "process $p still runs"
done
left() { for p in $pids; do ls "$shm" | grep -E "^ddstore\.$p\.[0-9]+$"; done; }
before=$(left)
[ -n "$before" ] || fail "no segment was left by the kill: the test missed the window"
echo "left by the killed job: $(echo $before)"
timeout -k 5 60 "$MPIEXEC" -n 1 "$prog" create >>"$log" 2>&1 || fail "dds_create after the crash failed"
after=$(left)
[ -z "$after" ] || { rm -f $(for f in $after; do echo "$shm/$f"; done); fail "dds_create left: $after"; }
echo "run_shm_crash: PASS (dds_create removed $(echo $before | wc -w) stale segment(s))"
