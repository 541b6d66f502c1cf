#!/usr/bin/env bash
# The `rocm` build on a machine without an AMD GPU (make test-rocm): the
# library built with `--features rocm` against Debian's HIP 5.2
# (libamdhip64-dev, HIP_PATH=/usr) must link libamdhip64.so.5, classify every
# pointer as host memory, and pass the GPU tests that need no device: its
# unit tests (the GPUDirect choice, FI_HMEM_ROCR included) and the C tests
# test_gpu and test_gpudirect run against it in place of the default build.
# Usage: scripts/rocm-check.sh ROCM_TARGET_DIR CAPI_TESTS_BUILD_DIR
set -euo pipefail
target=$(cd "$1" && pwd)
tests=$(cd "$2" && pwd)
lib=$target/release/libddstore.so
# ldd's output is kept whole before matching: `ldd | grep -q` under pipefail
# fails now and then, when grep exits at its match and ldd dies of SIGPIPE.
deps=$(ldd "$lib")
grep -q 'libamdhip64\.so\.5 => /' <<<"$deps" || { echo "rocm-check: $lib does not link libamdhip64.so.5" >&2; echo "$deps" >&2; exit 1; }
# The tests link libddstore.so.0 (the installed name); the cargo output has
# the unversioned file: a private directory holds the soname link.
libdir=$(mktemp -d)
trap 'rm -rf "$libdir"' EXIT
ln -s "$lib" "$libdir/libddstore.so.0"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
# The test binaries must really load this build.
deps=$(ldd "$tests/test_gpu")
grep -q "$libdir/libddstore.so.0" <<<"$deps" || { echo "rocm-check: test_gpu does not load $lib" >&2; exit 1; }
failed=0
run() { echo "--- $*"; timeout 120 "$@" || failed=$((failed + 1)); }
run mpiexec -n 2 "$tests/test_gpu"
run env DDS_TEST_METHOD=1 DDSTORE_FABRIC=shm DDSTORE_NODE_LOCAL=0 mpiexec -n 2 "$tests/test_gpu"
run mpiexec -n 2 "$tests/test_gpudirect"
echo "rocm-check: $failed failed"
exit $((failed > 0))
