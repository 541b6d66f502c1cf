#!/usr/bin/env bash
# make bench-cluster: the 2-rank C benchmark (capi-tests/bench) with one rank
# on each of two simulated nodes, run by test-cluster.sh inside the head node
# (cluster.sh run 2 -- bench.sh OUT ARGS...). Only the methods whose reads
# cross the network run (method 0 in both batch modes, method 1 over tcp),
# next to their floors, which then also cross the veth pair: MPI RMA gets,
# MPI_Alltoallv and raw fi_read over the same tcp provider.
set -euo pipefail
cd "$ROOT"
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
out=$1; shift
echo "bench across nodes: $(hosts 0 2 1), load average $(cat /proc/loadavg)"
mpx 0 2 1 "$BIN/bench" --methods "mpi,mpi onesided,fabric:tcp" --out "$out" "$@"
