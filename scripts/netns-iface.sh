#!/usr/bin/env bash
# The interface choice of method 1 across simulated nodes (make test-netns).
# Two "nodes", each a network namespace (own hostname and IPC namespace per
# launched process), and a head namespace where mpiexec runs; each node has
#   ddspd0: a veth whose address is the SAME on both nodes and which reaches
#           nothing (a stand-in for docker0/virbr0), created first so that
#           libfabric lists it before the real link;
#   ddspv0: a veth into a bridge in a namespace of its own (the node's link).
# One rank per node, launched by MPICH's hydra through a launcher that enters
# the node's namespace; MPI over UCX tcp on ddspv0. With FABRIC_IFACE unset:
#   1. dds_create must take ddspv0 and every row must read back;
#   2. with libfabric seeing only ddspd0 (FI_TCP_IFACE=ddspd0), dds_create
#      must fail on both ranks naming FABRIC_IFACE and ddspd0;
#   3. FABRIC_IFACE=ddspv0 named explicitly: read back as in 1;
#   4. FABRIC_IFACE=ddspd0 named explicitly (the user's word is kept): the
#      read times out, the message naming ddspd0 and FABRIC_IFACE.
# Before the fix, case 1 created the store on ddspd0 and its read timed out.
# Every address lives on veths inside the namespaces made here; a trap
# removes them, and the script checks that nothing is left.
# Not root, or no network namespaces: a loud SKIP (exit 0), never silent.
# Usage: scripts/netns-iface.sh PREFIX BUILD_DIR
#   PREFIX: an installed libddstore (make install-test-prefix's build/prefix);
#   MPIEXEC/MPICC (default Debian's MPICH): the MPI to launch with;
#   MPI_ABI_LIB: an MPICH-ABI libmpi.so.12 to run the MPICH build under
#   instead (make test-netns passes the MPICH 5 wheel's: Debian's 4.0.2
#   often hangs in MPI_Finalize over UCX tcp, docs/portability.md).
set -euo pipefail
prefix=$(cd "${1:?usage: $0 PREFIX BUILD_DIR}" && pwd)
b=${2:?usage: $0 PREFIX BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
MPICC=${MPICC:-mpicc.mpich}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
skip() {
    echo "netns-iface: SKIPPED ($*): the interface choice across nodes was NOT tested" >&2
    echo "netns-iface: 0 passed, 0 failed, 1 skipped"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "not root"
command -v ip >/dev/null && command -v nsenter >/dev/null && command -v unshare >/dev/null \
    || skip "ip, nsenter or unshare missing"

tag=ddsp$$
ns_br=$tag-br ns_hd=$tag-hd ns0=$tag-n0 ns1=$tag-n1
cleanup() {
    for n in "$ns0" "$ns1" "$ns_hd" "$ns_br"; do ip netns del "$n" 2>/dev/null || true; done
    local left
    left=$(ip netns list | grep "^$tag-" || true)
    if [ -n "$left" ]; then
        echo "netns-iface: namespaces left behind: $left" >&2
        exit 1
    fi
}
trap cleanup EXIT
ip netns add "$ns_br" 2>/dev/null || skip "cannot create a network namespace"

ip -n "$ns_br" link add br0 type bridge
ip -n "$ns_br" link set br0 up
# link NS ADDR: the namespace's veth ddspv0 into the bridge, with ADDR.
link() {
    ip netns add "$1"
    ip -n "$1" link set lo up
    ip -n "$1" link add ddspv0 type veth peer name "ddspb${1##*-}" netns "$ns_br"
    ip -n "$1" addr add "$2/24" dev ddspv0
    ip -n "$1" link set ddspv0 up
    ip -n "$ns_br" link set "ddspb${1##*-}" master br0
    ip -n "$ns_br" link set "ddspb${1##*-}" up
}
# The head (where mpiexec runs) and the two nodes.
link "$ns_hd" 10.231.0.254
for i in 0 1; do
    ns=$tag-n$i
    link "$ns" 10.231.0.$((i + 1))
    # The duplicate: the same address on both nodes, its peer end
    # unaddressed (created last: libfabric 1.17 lists it first).
    ip -n "$ns" link add ddspd0 type veth peer name ddspd1
    ip -n "$ns" addr add 172.31.250.1/24 dev ddspd0
    ip -n "$ns" link set ddspd0 up
    ip -n "$ns" link set ddspd1 up
done
# The link works before anything of ours runs (DAD may delay it briefly).
for t in $(seq 50); do
    ip netns exec "$ns_hd" ping -c1 -W1 10.231.0.2 >/dev/null 2>&1 \
        && ip netns exec "$ns_hd" ping -c1 -W1 10.231.0.1 >/dev/null 2>&1 && break
    [ "$t" = 50 ] && { echo "netns-iface: the veth link does not carry traffic" >&2; exit 1; }
    sleep 0.1
done
echo "netns-iface: libfabric tcp domains on node 0, in its order:" \
    "$(ip netns exec "$ns0" fi_info -p tcp -t FI_EP_RDM 2>/dev/null | awk '/domain:/ {print $2}' | uniq | tr '\n' ' ')"

# The launcher hydra calls as its "ssh": `launcher [options] HOST COMMAND...`;
# it enters the node whose link address is HOST, with its own hostname.
mkdir -p "$b"
b=$(cd "$b" && pwd)
cat > "$b/launcher.sh" <<EOS
#!/usr/bin/env bash
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case "\$host" in
    10.231.0.1) ns=$ns0 ;; 10.231.0.2) ns=$ns1 ;; *) echo "launcher: unknown host \$host" >&2; exit 1 ;;
esac
exec nsenter --net=/run/netns/\$ns unshare --uts --ipc sh -c "hostname node-\${ns##*-}; \$*"
EOS
chmod +x "$b/launcher.sh"

"$MPICC" -O1 -I"$prefix/include" -I"$root/capi-tests/tests" "$root/capi-tests/tests/test_iface_nodes.c" \
    -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lddstore -o "$b/test_iface_nodes"

if [ -n "${MPI_ABI_LIB:-}" ]; then
    # Debian's MPICH programs (and libddstore) need libmpich.so.12; an
    # MPICH-ABI library is libmpi.so.12: the same ABI under the other name.
    mkdir -p "$b/abi"
    ln -sf "$MPI_ABI_LIB" "$b/abi/libmpich.so.12"
    export LD_LIBRARY_PATH=$b/abi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
echo "netns-iface: MPI: $(ldd "$b/test_iface_nodes" | awk '/libmpi/ {print $1, $3}' | tr '\n' ' ')"
unset FABRIC_IFACE FI_TCP_IFACE FI_SOCKETS_IFACE DDSTORE_FABRIC
export UCX_TLS=self,sm,tcp UCX_NET_DEVICES=ddspv0 DDSTORE_READ_TIMEOUT_S=${DDSTORE_READ_TIMEOUT_S:-5}
passed=0 failed=0
run() { # NAME ENV... -- ARGS...
    local name=$1 envs=()
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local t0=$SECONDS
    if ip netns exec "$ns_hd" env "${envs[@]}" timeout 60 "$MPIEXEC" -launcher ssh -launcher-exec "$b/launcher.sh" \
        -iface ddspv0 -hosts 10.231.0.1,10.231.0.2 -n 2 -ppn 1 "$b/test_iface_nodes" "$@" > "$b/$name.log" 2>&1; then
        passed=$((passed + 1))
        echo "netns-iface: $name: passed ($((SECONDS - t0)) s)"
    else
        failed=$((failed + 1))
        echo "netns-iface: $name: FAILED ($((SECONDS - t0)) s)" >&2
    fi
    sed 's/^/    /' "$b/$name.log"
}
run automatic -- read ddspv0
run only-duplicate FI_TCP_IFACE=ddspd0 -- fail ddspd0
run named FABRIC_IFACE=ddspv0 -- read ddspv0
run named-duplicate FABRIC_IFACE=ddspd0 DDSTORE_READ_TIMEOUT_S=2 -- timeout ddspd0
echo "netns-iface: $passed passed, $failed failed"
[ "$failed" = 0 ]
