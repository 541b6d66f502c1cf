#!/usr/bin/env bash
# Snapshots (issue 38; docs/snapshots.md), driving tests/test_snapshot.c:
#
#   run_snapshot.sh PROG reshard   save on P ranks, load on P' ranks, for
#                                  every P, P' in 1..4 (every row compared)
#   run_snapshot.sh PROG damage    every damage kind refused on 1 and 3 ranks
#   run_snapshot.sh PROG kill      a save killed (SIGKILL) mid-write leaves
#                                  the old snapshot, or none, never a half one
#
# The method and provider come from the environment (DDS_TEST_METHOD,
# DDSTORE_FABRIC). DDSTORE_SNAPSHOT_CHUNK_BYTES=64 makes chunks smaller
# than rows, so loads read and verify part-files chunk by chunk.
set -u
prog=$1
what=$2
MPIEXEC=${MPIEXEC:-mpiexec}
export FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_TLS=self,sm
export DDSTORE_SNAPSHOT_CHUNK_BYTES=${DDSTORE_SNAPSHOT_CHUNK_BYTES:-64}
work=$(mktemp -d "${TMPDIR:-/tmp}/dds-snapshot.XXXXXX") || { echo "run_snapshot: FAIL: no directory"; exit 1; }
log=$work/log
trap 'rm -rf "$work"' EXIT
fail() { echo "run_snapshot ($what): FAIL: $*"; cat "$log"; exit 1; }
run() { # ranks args...
    local n=$1
    shift
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$prog" "$@" >"$log" 2>&1 || fail "-n $n $*"
}

case $what in
reshard)
    for p in 1 2 3 4; do
        run "$p" save "$work/s$p" "$p"
        for q in 1 2 3 4; do
            run "$q" load "$work/s$p" "$p" "$p"
        done
        echo "saved on $p, loaded on 1-4: ok"
    done
    ;;
damage)
    for p in 1 3; do
        mkdir "$work/d$p"
        run "$p" damage "$work/d$p"
        echo "damage on $p: $(tail -1 "$log")"
    done
    ;;
kill)
    # kill_save DIR: starts a 2-rank save of tag 2 into DIR that sleeps after
    # each shard file, kills it with SIGKILL once its .partial dir exists.
    kill_save() {
        DDSTORE_TEST_SAVE_DELAY_S=3 timeout -k 5 60 "$MPIEXEC" -n 2 "$prog" save "$1" 2 >"$log" 2>&1 &
        local job=$!
        for _ in $(seq 200); do
            ls -d "$1".partial-* >/dev/null 2>&1 && [ -n "$(ls "$1".partial-* 2>/dev/null)" ] && break
            sleep 0.05
        done
        ls -d "$1".partial-* >/dev/null 2>&1 || fail "no .partial directory appeared"
        sleep 1
        pids=$(sed -n 's/^pid [0-9]* \([0-9]*\)$/\1/p' "$log")
        [ "$(echo "$pids" | wc -w)" -eq 2 ] || fail "expected two pids"
        kill -9 $pids
        wait $job
    }
    run 2 save "$work/snap" 1
    kill_save "$work/snap"
    part=$(ls -d "$work"/snap.partial-* | head -1)
    [ -n "$part" ] || fail "the killed save left no .partial directory (missed the window)"
    for q in 1 3; do
        run "$q" load "$work/snap" 1 2
    done
    run 2 partial "$part"
    echo "killed save over an old snapshot: the old one loads"
    kill_save "$work/fresh"
    [ ! -e "$work/fresh" ] || fail "a killed first save left $work/fresh"
    run 2 missing "$work/fresh"
    echo "killed first save: no snapshot"
    # Finished afterwards, the save replaces the old one.
    run 2 save "$work/snap" 2
    run 3 load "$work/snap" 2 2
    echo "a later save replaces it"
    ;;
*) fail "unknown test $what" ;;
esac
echo "run_snapshot ($what): PASS"
