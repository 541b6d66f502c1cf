#!/usr/bin/env bash
# Method 2 with a ragged variable: a core job of 2 ranks registers it, an
# extra job of 1 rank (a separate mpiexec launch, sharing a fresh hand-shake
# directory) joins it with dds_join_ragged and verifies every sample. Both
# run under a time-out; both exit statuses are checked.
#
#   run_split_ragged.sh /path/to/test_ragged shm|tcp
set -u
prog=$1
prov=$2
MPIEXEC=${MPIEXEC:-mpiexec}
export DDSTORE_FABRIC=$prov FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_TLS=self,sm
export DDSTORE_HANDSHAKE_TIMEOUT_S=60
dir=$(mktemp -d "${TMPDIR:-/tmp}/dds-ragged-$prov.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export DDSTORE_HANDSHAKE_DIR=$dir
timeout -k 5 120 "$MPIEXEC" -n 2 "$prog" core 1 >"$dir/core.log" 2>&1 &
core=$!
timeout -k 5 120 "$MPIEXEC" -n 1 "$prog" extra 2 >"$dir/extra.log" 2>&1 &
extra=$!
rc=0
wait "$extra" || { echo "FAIL extra (exit $?)"; sed 's/^/    | /' "$dir/extra.log"; rc=1; }
wait "$core" || { echo "FAIL core (exit $?)"; sed 's/^/    | /' "$dir/core.log"; rc=1; }
cat "$dir/core.log" "$dir/extra.log" | grep -h "passed"
[[ $rc == 0 ]] && echo "run_split_ragged.sh ($prov): PASS"
exit $rc
