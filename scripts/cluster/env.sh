# Sourced by the scripts that run inside the head node of a simulated cluster
# (suite.sh, bench.sh): the environment that moves data over the nodes' veths
# and `mpx`, mpiexec (MPICH's hydra) across the nodes through nodeexec.
# Needs MPICH5 (the prefix of MPICH 5) and what cluster.sh sets.

# UCX's tcp transport and libfabric's tcp provider on each node's eth0 (the
# same name on every node, so one environment serves all).
export UCX_TLS=self,sm,tcp UCX_NET_DEVICES=eth0
export FABRIC_IFACE=eth0 FI_TCP_IFACE=eth0 FI_SOCKETS_IFACE=eth0
# MPICH from PyPI loads the libfabric it bundles (2.x); the library, built
# against Debian's 1.x headers, runs on it too, and one process holds only one.
export LD_LIBRARY_PATH=$MPICH5/lib/mpich${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$MPICH5/bin:$PATH

# hosts FIRST COUNT [PPN]: hydra's host list of COUNT nodes from node FIRST.
hosts() {
    local nodes i out=()
    read -r -a nodes <<< "$CLUSTER_NODES"
    for ((i = $1; i < $1 + $2; i++)); do out+=("${nodes[$i]}:${3:-2}"); done
    (IFS=,; echo "${out[*]}")
}

# mpx FIRST COUNT PPN ARGS...: mpiexec across COUNT nodes from FIRST, PPN ranks each.
mpx() {
    local first=$1 count=$2 ppn=$3; shift 3
    mpiexec -launcher ssh -launcher-exec "$CLUSTER_EXEC" -hosts "$(hosts "$first" "$count" "$ppn")" \
        -n $((count * ppn)) "$@"
}
export -f hosts mpx
