#!/usr/bin/env bash
# Developer check of the staged GPU paths on a machine WITHOUT a GPU: a small
# stand-in for libcuda (scripts/fakecuda/fakecuda.c) whose "device memory" is
# PROT_NONE host memory, so any host-side access to a device pointer faults,
# while its copy functions move the bytes. Runs the staged-path programs under
# real MPI and libfabric. It does not replace the device check
# (scripts/gpu-check.sh): it checks our routing, chunking, collective
# folding, counters and requests, not CUDA's semantics. `make test` runs it
# (`make test-staged`).
# Usage (after make install-test-prefix): scripts/fake-cuda-check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/fakecuda
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -shared -fPIC -O1 -o "$tmp/libcuda.so.1" "$src/fakecuda.c" -lpthread
ln -s libcuda.so.1 "$tmp/libcuda.so"
mpicc -O1 -I"$root/capi-tests/tests" -I"$root/build/prefix/include" "$src/staged.c" -o "$tmp/staged" \
    -L"$tmp" -lcuda -L"$root/build/prefix/lib" -lddstore
export LD_LIBRARY_PATH="$tmp:$root/build/prefix/lib" UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
failed=0
for cfg in "0 2" "1 2" "0 3"; do
    set -- $cfg
    DDS_TEST_METHOD=$1 DDSTORE_FABRIC=tcp timeout 120 mpiexec -n "$2" "$tmp/staged" || failed=$((failed + 1))
done
PY=${PYTHON:-$root/.venv/bin/python}
if "$PY" -c 'import mpi4py' 2>/dev/null; then
    PYTHONPATH="$root/python-ctypes" DDSTORE_LIBRARY="$root/build/prefix/lib/libddstore.so" DDSTORE_FABRIC=tcp \
        timeout 120 mpiexec -n 2 "$PY" "$src/py_staged.py" || failed=$((failed + 1))
fi
echo "fake-cuda-check: $failed failed"
exit $((failed > 0))
