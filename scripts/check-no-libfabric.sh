#!/bin/bash
# Method 0 where libfabric cannot be loaded: the library opens libfabric only
# for a fabric (docs/fabric.md, "Loading"). In a private mount namespace the
# libfabric shared object is hidden under an empty file, then
# capi-tests/tests/test_no_libfabric.c runs on 2 ranks of Debian's MPICH
# (ch4:ucx, which does not load libfabric): method-0 stores work, method 1
# fails on every rank naming libfabric. Root only (make test-netns).
# Usage: check-no-libfabric.sh PREFIX BUILD_DIR
set -euo pipefail
prefix=$(cd "${1:?usage: $0 PREFIX BUILD_DIR}" && pwd)
b=${2:?usage: $0 PREFIX BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
skip() {
    echo "check-no-libfabric: SKIPPED ($*): method 0 without libfabric was NOT tested" >&2
    exit 0
}
[ "$(id -u)" = 0 ] || skip "not root"
command -v unshare >/dev/null || skip "unshare missing"
so=$(ldconfig -p | awk '/libfabric\.so\.1 / && !f {f = $NF} END {print f}')
[ -n "$so" ] || { echo "check-no-libfabric: no libfabric.so.1 known to ldconfig" >&2; exit 1; }
real=$(readlink -f "$so")
mkdir -p "$b"
mpicc.mpich -O1 -I"$prefix/include" -I"$root/capi-tests/tests" "$root/capi-tests/tests/test_no_libfabric.c" \
    -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lddstore -o "$b/test_no_libfabric"
if ldd "$b/test_no_libfabric" | grep -q libfabric; then
    echo "check-no-libfabric: FAIL: the program links libfabric: $(ldd "$b/test_no_libfabric" | grep libfabric)" >&2
    exit 1
fi
log=$b/test_no_libfabric.log
if unshare -m sh -c 'mount --bind /dev/null "$1" && shift && exec "$@"' sh "$real" \
    env UCX_TLS=self,sm mpiexec.mpich -n 2 "$b/test_no_libfabric" > "$log" 2>&1 \
    && grep -q "test_no_libfabric on 2 ranks: [1-9][0-9]* passed, 0 failed" "$log"; then
    echo "check-no-libfabric: passed ($real hidden: method 0 read every row, method 1 refused on every rank)"
else
    cat "$log" >&2
    echo "check-no-libfabric: FAIL" >&2
    exit 1
fi
