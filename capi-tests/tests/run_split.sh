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
trap 'umount "$base/tmpfs" 2>/dev/null; [[ -n "${SPLIT_KEEP:-}" ]] || rm -rf "$base"' EXIT
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
# The keys of the live records, for the no-secret check at the end.
launch "$base/keys.1.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" keys; k=$!
check "keys of the live records read" $k "$base/keys.1.log"
launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" extra; e=$!
check "core -n 2 started before extra -n 2: extra" $e "$d.extra.log"
# Access: the directory the core created is 0700, records and done files 0600.
modes=$(stat -c '%a %n' "$d" "$d"/*.ddsrec "$d"/ddsdone.* 2>&1)
if [[ $(stat -c %a "$d") == 700 ]] && ! grep -v '^600 ' <<<"$(tail -n +2 <<<"$modes")" | grep . >/dev/null; then
    echo "ok   hand-shake directory 0700, records and done files 0600 ($(wc -l <<<"$modes") checked)"
else
    echo "FAIL modes:"; sed 's/^/    | /' <<<"$modes"; failed=1
fi
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
# The killed core's records stay (never withdrawn): keys for the check at the
# end, and an extra that joins them now fails in time.
launch "$base/keys.2.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" keys; k=$!
check "keys of a killed core's records read" $k "$base/keys.2.log"
launch "$d.late.log" env DDSTORE_READ_TIMEOUT_S=3 DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" join-dead; e=$!
check "core gone before an extra joins: join or read fails in time" $e "$d.late.log"
grep -h "killed core" "$d.late.log" | sed 's/^/    /'
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

# 8. Hand-shake directories that cannot be created, or that others may
#    write: DDS_ERR_IO naming them, on every core rank and on an extra.
d=$base/baddir
launch "$d.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" baddir; e=$!
check "directory not creatable / writable by others: refused on every rank" $e "$d.log"

# 9. A directory the core may not write. Root ignores mode bits, so as root
#    the core runs without CAP_DAC_OVERRIDE (setpriv); covered only where
#    the probe shows the bits then apply.
d=$base/unwritable
mkdir -m 700 "$d" && chmod 500 "$d"
nodac=()
[[ $(id -u) == 0 ]] && nodac=(setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search)
if ! "${nodac[@]}" true 2>/dev/null; then
    echo "NOT COVERED unwritable directory: cannot drop CAP_DAC_OVERRIDE here (${nodac[*]})"
elif "${nodac[@]}" touch "$d/probe" 2>/dev/null; then
    echo "NOT COVERED unwritable directory: a mode-0500 directory is still writable here"
else
    launch "$d.log" env DDSTORE_HANDSHAKE_DIR="$d" "${nodac[@]}" "$MPIEXEC" -n 2 "$prog" unwritable; c=$!
    check "directory not writable: dds_add/dds_init fail on every rank, destroy clean" $c "$d.log"
fi
chmod 700 "$d"

# 10. The record write fails (rank 0 limited to 64-byte files by
#     RLIMIT_FSIZE: EFBIG, works unprivileged): DDS_ERR_IO on every rank,
#     nothing left behind; an extra waiting meanwhile never sees a partial
#     record and joins the later, complete one.
d=$base/fsize
launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" extra; e=$!
launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" full 64; c=$!
check "record write fails (RLIMIT_FSIZE): core" $c "$d.core.log"
check "record write fails (RLIMIT_FSIZE): extra waiting meanwhile" $e "$d.extra.log"

# 11. A full file system: a filled 64 KiB tmpfs (ENOSPC), where mounting is
#     permitted (root, not in an unprivileged container).
d=$base/tmpfs
mkdir -m 700 "$d"
if mount -t tmpfs -o size=64k,mode=0700 tmpfs "$d" 2>/dev/null; then
    dd if=/dev/zero of="$d/filler" bs=4k 2>/dev/null
    launch "$d.extra.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 1 "$prog" extra; e=$!
    launch "$d.core.log" env DDSTORE_HANDSHAKE_DIR="$d" "$MPIEXEC" -n 2 "$prog" full -; c=$!
    check "record write fails (full tmpfs): core" $c "$d.core.log"
    check "record write fails (full tmpfs): extra waiting meanwhile" $e "$d.extra.log"
    umount "$d"
else
    echo "NOT COVERED full file system (tmpfs): mount not permitted here (RLIMIT_FSIZE case above still ran)"
fi

# 12. No key or base address of any record appears in anything the
#     processes printed. Values below 4096 (keys the provider numbers 1, 2,
#     ..., bases of 0 without FI_MR_VIRT_ADDR) are not distinctive and are
#     not looked for.
vals=$(cat "$base"/keys.*.log 2>/dev/null | awk '/^(key|base) [0-9]+$/ && $2 >= 4096 {print $2}' | sort -u)
n_vals=$(grep -c . <<<"$vals")
leaks=""
logs=$(ls "$base"/*.log | grep -v '/keys\.')
for v in $vals; do
    hex=$(printf '%x' "$v")
    hit=$(grep -l -i -w -E "$v|(0x)?0*$hex" $logs)
    [[ -n $hit ]] && leaks+="$v (0x$hex) in: $hit"$'\n'
done
if [[ -n $leaks ]]; then
    echo "FAIL secrets in process output:"; printf '%s' "$leaks" | sed 's/^/    | /'; failed=1
else
    echo "ok   no key or base address in the output of $(wc -w <<<"$logs") logs ($n_vals distinctive value(s) checked)"
fi

if [[ $failed != 0 ]]; then
    echo "run_split.sh ($prov): FAIL"
    exit 1
fi
echo "run_split.sh ($prov): PASS"
