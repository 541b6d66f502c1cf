#!/usr/bin/env bash
# The device check: runs libddstore's GPU checks on a machine with an NVIDIA
# GPU, CUDA's driver, Python with PyTorch and numpy, but no MPI, libfabric or
# our build. Everything else comes in build/gpu-bundle (scripts/gpu-bundle.sh,
# or `make gpu-bundle`), carried next to the working tree:
#
#   run(command="bash scripts/gpu-check.sh", carry=["build/gpu-bundle"], timeout_s=420)
#
# Writes to $OUT (default ./gpu-check-out): env.txt (machine, versions),
# checks-*.jsonl (one JSON line per check and rank, measurements included),
# log-*.txt (each run's output) and summary.txt. Exits non-zero if any run failed.
set -u
cd "$(dirname "$0")/.."
root=$PWD
bundle=$root/build/gpu-bundle
OUT=${OUT:-$root/gpu-check-out}
mkdir -p "$OUT"
export OUT
PY=${PYTHON:-python3}
[ -d "$bundle/lib" ] || { echo "gpu-check: $bundle missing (carry build/gpu-bundle)" >&2; exit 2; }

export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$bundle/bin:$PATH"
export UCX_MODULE_DIR="$bundle/lib/ucx"
[ -d "$bundle/lib/libfabric" ] && export FI_PROVIDER_PATH="$bundle/lib/libfabric"
export DDSTORE_LIBRARY="$bundle/lib/libddstore.so.0"
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
export HYDRA_LAUNCHER=fork
# pyddstore's binding (cffi, pycparser): from the bundle's wheels if this Python lacks them.
if ! "$PY" -c 'import cffi, pycparser' 2>/dev/null; then
    tag=$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    site=$bundle/python-$tag
    for w in "$bundle"/wheels/cffi-*-"$tag"-"$tag"-*.whl "$bundle"/wheels/pycparser-*.whl; do
        [ -f "$w" ] || { echo "gpu-check: no wheel for $w in the bundle ($PY is $tag)" >&2; exit 2; }
        "$PY" -m zipfile -e "$w" "$site"
    done
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# A single GPU is shared by both ranks.
NP=${GPU_CHECK_NP:-2}

{
    echo "date: $(date -u +%FT%TZ)"
    uname -a
    ldd --version 2>&1 | head -1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    "$PY" -c 'import sys, numpy, torch; print("python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())' 2>&1
    echo "--- missing shared objects (should be none):"
    ldd "$DDSTORE_LIBRARY" | grep "not found"
    ldd "$bundle/bin/test_gpu" | grep "not found"
    echo "---"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

failed=0
summary() { echo "$1" | tee -a "$OUT/summary.txt"; }
step() {  # step NAME TIMEOUT COMMAND...
    local name=$1 t=$2; shift 2
    echo "=== $name"
    if timeout -k 10 "$t" "$@" > "$OUT/log-$name.txt" 2>&1; then
        summary "$name: PASS"
    else
        summary "$name: FAIL (rc $?)"
        failed=$((failed + 1))
    fi
    tail -25 "$OUT/log-$name.txt"
}

# 1. The C test with a driver present: classification, require, streams.
step c-test-method0 60 mpiexec -n "$NP" "$bundle/bin/test_gpu"
step c-test-method1-tcp 60 env DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp mpiexec -n "$NP" "$bundle/bin/test_gpu"

# 2. The PyTorch checks, staged path, per method/provider.
step py-method0 150 env DDS_TEST_METHOD=0 mpiexec -n "$NP" "$PY" scripts/gpu_check.py method0
step py-method1-tcp 150 env DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp mpiexec -n "$NP" "$PY" scripts/gpu_check.py method1-tcp
step py-method1-shm-nodelocal0 120 env DDS_TEST_METHOD=1 DDSTORE_FABRIC=shm DDSTORE_NODE_LOCAL=0 \
    GPU_CHECK_ONLY=get_into_poisoned_gpu_tensor,get_batch_gpu_vs_host,get_batch_small_chunks,stream_ordering,staging_off_refuses \
    mpiexec -n "$NP" "$PY" scripts/gpu_check.py method1-shm

# 3. The measurement alone on one rank (no second process time-slicing the GPU).
step py-measure-np1 90 env DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 \
    GPU_CHECK_ONLY=measure_stream_vs_device_sync mpiexec -n 1 "$PY" scripts/gpu_check.py measure-np1

summary "gpu-check: $failed failed step(s)"
exit $((failed > 0))
