#!/usr/bin/env bash
# A real Slurm (Debian's slurm-wlm, with munge) on the simulated cluster of
# cluster.sh, which calls this (`cluster.sh run N --slurm -- ...`):
#
#   slurm.sh start DIR NODE...   munged and slurmctld in the head node, one
#                                slurmd per node; waits until every node is idle
#   slurm.sh stop DIR            stops them (cluster.sh's teardown then ends
#                                anything left inside the namespaces)
#
# Everything (configuration, keys, sockets, spool, state, logs) lives under
# DIR/slurm and DIR/munge; nothing of the machine's own /etc/slurm or munge is
# used. Jobs run as root. Slurm's pmi2 plugin (MpiDefault=pmi2) serves MPICH.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=$1 DIR=$2; shift 2
S=$DIR/slurm M=$DIR/munge
export CLUSTER_DIR=$DIR
on() { "$HERE/nodeexec" "$@"; }

start() {
    local nodes=("$@") i
    rm -rf "$S" "$M"
    mkdir -p "$S/ctld" "$M"
    chmod 700 "$M"
    # munge: one daemon, in the head node; the nodes reach its socket
    # through the shared file system (a path socket ignores network namespaces).
    head -c 1024 /dev/urandom > "$M/munge.key"
    chmod 400 "$M/munge.key"
    on ddsnhead munged --force --socket="$M/munge.socket" --key-file="$M/munge.key" \
        --pid-file="$M/munged.pid" --log-file="$M/munged.log" --seed-file="$M/munged.seed"
    {
        echo "ClusterName=ddsn"
        echo "SlurmctldHost=ddsnhead(10.34.0.1)"
        echo "SlurmUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$M/munge.socket"
        echo "StateSaveLocation=$S/ctld"
        echo "SlurmdSpoolDir=$S/spool-%n"
        echo "SlurmctldPidFile=$S/slurmctld.pid"
        echo "SlurmdPidFile=$S/slurmd-%n.pid"
        echo "SlurmctldLogFile=$S/slurmctld.log"
        echo "SlurmdLogFile=$S/slurmd-%n.log"
        echo "SlurmdDebug=info"
        # No cgroups, no accounting: plain process tracking works in any container.
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "SwitchType=switch/none"
        echo "SchedulerType=sched/builtin"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "MpiDefault=pmi2"
        echo "ReturnToService=2"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        echo "MinJobAge=10"
        # Nodes of 4 CPUs on a 2-core machine: slurmd reports what is configured.
        echo "SlurmdParameters=config_overrides"
        for ((i = 0; i < ${#nodes[@]}; i++)); do
            echo "NodeName=${nodes[$i]} NodeAddr=10.34.0.$((11 + i)) CPUs=4 RealMemory=2000 State=UNKNOWN"
        done
        echo "PartitionName=cluster Nodes=ALL Default=YES MaxTime=30 State=UP"
    } > "$S/slurm.conf"
    export SLURM_CONF=$S/slurm.conf
    on ddsnhead slurmctld -f "$SLURM_CONF"
    for n in "${nodes[@]}"; do on "$n" slurmd -f "$SLURM_CONF" -N "$n"; done
    for _ in $(seq 150); do
        if [ "$(on ddsnhead sinfo -h -o %T 2>/dev/null | sort -u | tr -d '\n')" = idle ]; then
            echo "slurm: up (slurmctld on ddsnhead, slurmd on ${nodes[*]}, munge; conf $SLURM_CONF)"
            on ddsnhead sinfo
            return 0
        fi
        sleep 0.2
    done
    echo "slurm: the nodes did not become idle:" >&2
    on ddsnhead sinfo -N -l >&2 || true
    tail -n 20 "$S"/*.log "$M/munged.log" >&2 || true
    return 1
}

stop() {
    export SLURM_CONF=$S/slurm.conf
    [ -f "$SLURM_CONF" ] && on ddsnhead scancel --quiet --user=root 2>/dev/null || true
    local f
    for f in "$S"/slurmd-*.pid "$S/slurmctld.pid" "$M/munged.pid"; do
        [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null || true
    done
    echo "slurm: stopped"
}

case "$cmd" in
    start) start "$@" ;;
    stop) stop ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
