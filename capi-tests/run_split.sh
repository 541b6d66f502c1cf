#!/usr/bin/env bash
# Method 2 (split jobs) on this machine: the core job and the extra jobs are
# separate mpiexec launches sharing a fresh hand-shake directory, started in
# both orders, over one libfabric provider. Every process runs under a
# time-out (a hang fails, never blocks) and every exit status is checked.
#
#   run_split.sh /path/to/test_split shm|tcp [example_split_core example_split_extra]
#
# At most 4 MPI processes run at once (core -n 2 plus extras).
set -u
prog=$1
prov=$2
MPIEXEC=${MPIEXEC:-mpiexec}
T=${SPLIT_TIMEOUT:-120}   # seconds per process
export DDSTORE_FABRIC=$prov FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_TLS=self,sm
export DDSTORE_HANDSHAKE_TIMEOUT_S=60 SPLIT_N_CORE=2

base=$(mktemp -d "${TMPDIR:-/tmp}/dds-split-$prov.XXXXXX")
trap '[[ -n "${SPLIT_KEEP:-}" ]] || rm -rf "$base"' EXIT
failed=0

# launch LOG CMD...: starts CMD in the background under a time-out; $! is its pid.
launch() {
    local log=$1
    shift
    timeout -k 5 "$T" "$@" >"$log" 2>&1 &
}

# check WHAT PID LOG: waits for PID, reports, shows the log on failure.
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

# wait_for FILE-GLOB: until a file matching it exists (at most 60 s).
wait_for() {
    for _ in $(seq 600); do
        compgen -G "$1" >/dev/null && return 0
        sleep 0.1
    done
    echo "FAIL no $1 after 60 s"
    failed=1
    return 1
}


echo "== method 2 over $prov (hand-shake directories under $base)"

# 1. An extra job of 1 rank starts first, then the core job.
d=$base/extra1-first
launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" extra; e=$!
sleep 1
launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" core 1; c=$!
check "extra -n 1 started before core -n 2: extra" $e "$d.extra.log"
check "extra -n 1 started before core -n 2: core" $c "$d.core.log"

# 2. The core first, then an extra job of 2 ranks, then the rejection
#    checks against the live core, then an extra after the core freed.
d=$base/core-first
launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" core 3; c=$!
wait_for "$d/x.*.ddsrec"
launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" extra; e=$!
check "core -n 2 started before extra -n 2: extra" $e "$d.extra.log"
launch "$d.rejects.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" rejects; r=$!
check "rejects wrong n_core/provider/row width, truncated/corrupt/version/mode" $r "$d.rejects.log"
check "core -n 2 started before extra -n 2: core" $c "$d.core.log"
launch "$d.late.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" late; l=$!
check "extra started after the core freed: clear error at once" $l "$d.late.log"

# 3. An extra job of 2 ranks first, then the core.
d=$base/extra2-first
launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" extra; e=$!
sleep 1
launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" core 2; c=$!
check "extra -n 2 started before core -n 2: extra" $e "$d.extra.log"
check "extra -n 2 started before core -n 2: core" $c "$d.core.log"

# 4. The core first, then an extra of 1 rank that names no provider (it
#    takes the record's).
d=$base/core-first-auto
launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" core 1; c=$!
wait_for "$d/w.*.ddsrec"
launch "$d.extra.log" env -u DDSTORE_FABRIC DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" extra; e=$!
check "core -n 2 then extra -n 1 without DDSTORE_FABRIC: extra" $e "$d.extra.log"
check "core -n 2 then extra -n 1 without DDSTORE_FABRIC: core" $c "$d.core.log"

# 5. No core at all: join times out naming the directory and the variable.
d=$base/no-core
launch "$d.log" env DDSTORE_HANDSHAKE_TIMEOUT_S=1 DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" timeout; e=$!
check "join with no core times out" $e "$d.log"

# 6. The core is killed while an extra reads: the extra gets an error
#    within DDSTORE_READ_TIMEOUT_S, no hang.
d=$base/killed
launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" serve; c=$!
wait_for "$d/core.pid.1"
wait_for "$d/core.pid.0"
launch "$d.extra.log" env DDSTORE_READ_TIMEOUT_S=3 DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" read-until-dead; e=$!
if wait_for "$d/extra.reading"; then
    sleep 0.5
    kill -9 "$(cat "$d/core.pid.0")" "$(cat "$d/core.pid.1")" 2>/dev/null
fi
check "core killed while an extra reads: extra fails in time" $e "$d.extra.log"
grep -h "killed core" "$d.extra.log" | sed 's/^/    /'
kill "$c" 2>/dev/null
wait "$c" 2>/dev/null
# The killed core could not remove its libfabric shm regions (/dev/shm/<pid>:*);
# left there, a later process that gets the same pid fails fi_enable (EBUSY).
for f in "$d"/core.pid.*; do
    [[ -f $f ]] && rm -f /dev/shm/"$(cat "$f")":*
done

# 7. The two-job example of docs/method2.md, as its comments say to run it
#    (extra first here).
if [[ $# -ge 4 ]]; then
    d=$base/example
    launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$4"; e=$!
    launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$3"; c=$!
    check "docs example: example_split_extra -n 1" $e "$d.extra.log"
    check "docs example: example_split_core -n 2" $c "$d.core.log"
    sed 's/^/    /' "$d.extra.log"
fi

if [[ $failed != 0 ]]; then
    echo "run_split.sh ($prov): FAIL"
    exit 1
fi
echo "run_split.sh ($prov): PASS"
