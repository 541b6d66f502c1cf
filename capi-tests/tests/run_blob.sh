#!/usr/bin/env bash
# Blobs between two real jobs sharing a fresh hand-shake directory: a core
# job (test_blob publish N) publishes and waits for N acknowledgements; an
# extra job (test_blob wait, N ranks) waits for its blobs and acknowledges.
# Both orders; every process under a time-out, every exit status checked.
#
#   run_blob.sh /path/to/test_blob
set -u
prog=$1
MPIEXEC=${MPIEXEC:-mpiexec}
T=${BLOB_TIMEOUT:-90}
export FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_TLS=self,sm DDSTORE_HANDSHAKE_TIMEOUT_S=60
base=$(mktemp -d "${TMPDIR:-/tmp}/dds-blob-jobs.XXXXXX")
trap 'rm -rf "$base"' EXIT
failed=0

check() {
    local rc=0
    wait "$2" || rc=$?
    if [[ $rc == 0 ]]; then
        echo "ok   $1"
    else
        echo "FAIL $1 (exit $rc)"
        sed 's/^/    | /' "$3"
        failed=1
    fi
}

# pair NAME READERS FIRST: the two jobs, FIRST (core|extra) started 1 s ahead.
pair() {
    local d=$base/$1 n=$2 c e
    if [[ $3 == extra ]]; then
        DDSTORE_HANDSHAKE_DIR=$d timeout -k 5 "$T" "$MPIEXEC" -n "$n" "$prog" wait >"$d.extra.log" 2>&1 & e=$!
        sleep 1
        DDSTORE_HANDSHAKE_DIR=$d timeout -k 5 "$T" "$MPIEXEC" -n 2 "$prog" publish "$n" >"$d.core.log" 2>&1 & c=$!
    else
        DDSTORE_HANDSHAKE_DIR=$d timeout -k 5 "$T" "$MPIEXEC" -n 2 "$prog" publish "$n" >"$d.core.log" 2>&1 & c=$!
        sleep 1
        DDSTORE_HANDSHAKE_DIR=$d timeout -k 5 "$T" "$MPIEXEC" -n "$n" "$prog" wait >"$d.extra.log" 2>&1 & e=$!
    fi
    check "$1: extra job of $n rank(s) waits for the core's blobs" $e "$d.extra.log"
    check "$1: core job of 2 ranks waits for $n acknowledgement(s)" $c "$d.core.log"
}

pair extra-first 2 extra
pair core-first 1 core
if [[ $failed != 0 ]]; then
    echo "run_blob.sh: FAIL"
    exit 1
fi
echo "run_blob.sh: PASS"
