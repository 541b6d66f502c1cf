#!/usr/bin/env bash
# A simulated cluster on this machine (root only), for tests that need
# several nodes. See docs/cluster.md.
#
#   scripts/cluster/cluster.sh run N [--slurm] -- COMMAND...
#       brings up N nodes (ddsn0..ddsn<N-1>) and a head node (ddsnhead),
#       runs COMMAND inside the head node (the "login node"), tears
#       everything down (also on failure or signal) and checks that nothing
#       is left. Exit status: COMMAND's, or non-zero if set-up or the
#       teardown check failed.
#   scripts/cluster/cluster.sh check
#       exits non-zero (and says what) if anything of a cluster is left.
#
# A node is a long-lived holder process made with unshare: its own network
# namespace (one veth, `eth0`, with an address of 10.34.0.0/24), hostname
# (UTS), IPC namespace and mount namespace, in which /dev/shm is a private
# tmpfs and /etc/hosts a file of the cluster; the rest of the file system is
# shared, like a cluster's. Every eth0 is the end of a veth pair whose other
# end sits on a bridge in a namespace of its own (the "switch", which has no
# address). No address exists outside these namespaces, and nothing is sent
# anywhere else. `nodeexec HOST CMD` (beside this script) runs a command in
# a node: MPICH's hydra and Open MPI use it as their ssh.
#
# COMMAND sees: CLUSTER_NODES (the node names), CLUSTER_N, CLUSTER_EXEC (the
# ssh-like launcher), CLUSTER_DIR (the state directory), CLUSTER_SLURM=1 and
# SLURM_CONF when --slurm started Slurm (scripts/cluster/slurm.sh).

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PREFIX=ddsn                 # every name made here starts with it
SUBNET=10.34.0              # a /24 used nowhere else on this machine
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/build/cluster/run}
# The registry of running clusters: one file per holder, named by its pid.
REG=/run/ddsn-cluster

log() { echo "cluster: $*" >&2; }

# Network-namespace inodes of every holder recorded in $REG.
recorded_netns() {
    local f
    for f in "$REG"/*.netns; do [ -e "$f" ] && cat "$f"; done
    return 0
}

# Pids of every process (holders, daemons, ranks) inside a recorded namespace.
procs_in_cluster() {
    local inodes p ns
    inodes=" $(recorded_netns | tr '\n' ' ') "
    [ "$inodes" = "  " ] && return 0
    for p in /proc/[0-9]*; do
        ns=$(readlink "$p/ns/net" 2>/dev/null) || continue
        case "$inodes" in *" $ns "*) echo "${p#/proc/}" ;; esac
    done
}

# What is left of a cluster, one line each; nothing when clean.
leftovers() {
    local p
    for p in $(procs_in_cluster); do
        echo "process $p ($(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-80)) in a cluster namespace"
    done
    ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | grep "^$PREFIX" | sed 's/^/host interface /' || true
    ip netns list 2>/dev/null | grep "^$PREFIX" | sed 's/^/named namespace /' || true
    grep " $CLUSTER_DIR" /proc/mounts | sed 's/^/mount /' || true
    if [ -f "$CLUSTER_DIR/munged.pid" ] && kill -0 "$(cat "$CLUSTER_DIR/munged.pid")" 2>/dev/null; then
        echo "munged $(cat "$CLUSTER_DIR/munged.pid")"
    fi
    return 0
}

teardown() {
    local rc=$? pids p i
    trap - EXIT INT TERM HUP
    set +e
    [ -n "${SLURM_UP:-}" ] && "$HERE/slurm.sh" stop "$CLUSTER_DIR" >&2
    # Everything inside the namespaces (ranks, proxies, daemons), then the holders.
    for i in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(procs_in_cluster)
        [ -z "$pids" ] && break
        if [ "$i" -le 5 ]; then kill -TERM $pids 2>/dev/null; else kill -KILL $pids 2>/dev/null; fi
        sleep 0.3
    done
    for p in "${HOLDERS[@]}"; do wait "$p" 2>/dev/null; done
    rm -f "$REG"/*.netns
    rmdir "$REG" 2>/dev/null
    local left
    left=$(leftovers)
    if [ -n "$left" ]; then
        log "TEARDOWN LEFT SOMETHING:"; echo "$left" >&2
        [ "$rc" = 0 ] && rc=70
    else
        log "torn down; nothing left (namespaces, veths, mounts, processes)"
    fi
    exit "$rc"
}

# start_holder NAME NSFLAGS... : a holder process; its pid in HOLDER_PID.
start_holder() {
    local name=$1; shift
    local pidf="$CLUSTER_DIR/$name.pid"
    rm -f "$pidf"
    # The inner shell writes its pid, sets up what only it can (hostname,
    # /dev/shm, /etc/hosts) and becomes a sleep that lasts as long as the node.
    unshare "$@" --fork bash -c '
        set -e
        name=$1 dir=$2 node=$3
        if [ "$node" = 1 ]; then
            hostname "$name"
            mount -t tmpfs -o mode=1777,size=1g "'"$PREFIX"'-shm-$name" /dev/shm
            mount --bind "$dir/hosts" /etc/hosts
        fi
        echo $$ > "$dir/$name.pid.tmp"; mv "$dir/$name.pid.tmp" "$dir/$name.pid"
        exec sleep infinity' holder "$name" "$CLUSTER_DIR" "$([ "$name" = "$PREFIX-switch" ] && echo 0 || echo 1)" \
        </dev/null >/dev/null 2>>"$CLUSTER_DIR/holders.log" &
    HOLDERS+=($!)
    for _ in $(seq 100); do [ -s "$pidf" ] && break; sleep 0.05; done
    [ -s "$pidf" ] || { log "holder $name did not start (see $CLUSTER_DIR/holders.log)"; return 1; }
    HOLDER_PID=$(cat "$pidf")
    readlink "/proc/$HOLDER_PID/ns/net" > "$REG/$HOLDER_PID.netns"
}

in_ns() { local pid=$1; shift; nsenter -t "$pid" -n -- "$@"; }
# enter NAME ARGV... : run ARGV (words kept as they are) in every namespace
# of a node, in the current directory.
enter() {
    local pid; pid=$(cat "$CLUSTER_DIR/$1.pid"); shift
    nsenter -t "$pid" -n -u -i -m -- /bin/sh -c 'cd "$1" || exit 1; shift; exec "$@"' enter "$PWD" "$@"
}

cmd_run() {
    local n=$1; shift
    local slurm=0
    [ "${1:-}" = --slurm ] && { slurm=1; shift; }
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || { log "run: no command"; exit 2; }
    [[ "$n" =~ ^[1-9]$ ]] || { log "run: N must be 1..9"; exit 2; }

    [ "$(id -u)" = 0 ] || { log "needs root"; exit 77; }
    if [ -n "$(leftovers)" ]; then
        log "a cluster is already up or was left behind:"; leftovers >&2; exit 75
    fi
    mkdir -p "$REG" "$CLUSTER_DIR"
    rm -f "$CLUSTER_DIR"/*.pid "$CLUSTER_DIR/holders.log"
    HOLDERS=()
    trap teardown EXIT
    trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

    local nodes=() i
    for ((i = 0; i < n; i++)); do nodes+=("$PREFIX$i"); done
    {
        echo "127.0.0.1 localhost"
        echo "$SUBNET.1 ${PREFIX}head"
        for ((i = 0; i < n; i++)); do echo "$SUBNET.$((11 + i)) $PREFIX$i"; done
    } > "$CLUSTER_DIR/hosts"

    local sw
    start_holder "$PREFIX-switch" --net; sw=$HOLDER_PID
    in_ns "$sw" ip link set lo up
    in_ns "$sw" ip link add br0 type bridge
    in_ns "$sw" ip link set br0 up
    # plug NAME ADDR: a node's eth0 and its port on the switch.
    plug() {
        local name=$1 addr=$2 pid port
        pid=$(cat "$CLUSTER_DIR/$name.pid")
        port="${PREFIX}p${name#"$PREFIX"}"
        in_ns "$sw" ip link add "$port" type veth peer name eth0 netns "$pid"
        in_ns "$sw" ip link set "$port" master br0
        in_ns "$sw" ip link set "$port" up
        in_ns "$pid" ip link set lo up
        in_ns "$pid" ip addr add "$addr/24" dev eth0
        in_ns "$pid" ip link set eth0 up
    }
    start_holder "${PREFIX}head" --net --uts --ipc --mount --propagation private
    plug "${PREFIX}head" "$SUBNET.1"
    for ((i = 0; i < n; i++)); do
        start_holder "${nodes[$i]}" --net --uts --ipc --mount --propagation private
        plug "${nodes[$i]}" "$SUBNET.$((11 + i))"
    done
    # Every node answers on the bridge before anything runs.
    for ((i = 0; i < n; i++)); do
        local ok=0
        for _ in $(seq 50); do
            if enter "${PREFIX}head" ping -c 1 -W 1 "${nodes[$i]}" > /dev/null 2>&1; then ok=1; break; fi
            sleep 0.1
        done
        [ "$ok" = 1 ] || { log "${nodes[$i]} does not answer on the bridge"; exit 1; }
    done
    log "up: ${PREFIX}head + ${nodes[*]} on $SUBNET.0/24 (state in $CLUSTER_DIR)"

    export CLUSTER_NODES="${nodes[*]}" CLUSTER_N=$n CLUSTER_EXEC="$HERE/nodeexec" CLUSTER_DIR
    if [ "$slurm" = 1 ]; then
        SLURM_UP=1
        "$HERE/slurm.sh" start "$CLUSTER_DIR" "${nodes[@]}" >&2
        export CLUSTER_SLURM=1 SLURM_CONF="$CLUSTER_DIR/slurm/slurm.conf"
    fi
    # In the background, so that a signal runs the teardown at once (bash
    # runs traps only between foreground commands, but interrupts `wait`).
    set +e
    enter "${PREFIX}head" "$@" &
    wait $!
    local rc=$?
    set -e
    return "$rc"
}

case "${1:-}" in
    run) shift; [ $# -ge 1 ] || { log "usage: $0 run N [--slurm] -- COMMAND..."; exit 2; }
         cmd_run "$@" ;;
    check) left=$(leftovers); if [ -n "$left" ]; then echo "$left"; exit 1; fi; echo "cluster: nothing left" ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
