#!/usr/bin/env bash
# The device check: runs libddstore's GPU checks on a machine with an NVIDIA
# GPU, CUDA's driver, Python with PyTorch and numpy, but no MPI, libfabric or
# our build. Everything else comes in build/gpu-bundle (scripts/gpu-bundle.sh,
# or `make gpu-bundle`), carried next to the working tree:
#
#   run(command="bash scripts/gpu-check.sh", carry=["build/gpu-bundle"], timeout_s=420)
#
# Steps run most important first (GPUDirect, then the measurements, then the
# staged paths) under one budget, GPU_CHECK_BUDGET_S (default 330 s): a step
# that no longer fits is reported SKIPPED, so the run ends in time for the
# device's 8 minutes including its start.
#
# Writes to $OUT (default ./gpu-check-out): env.txt (machine, versions),
# checks-*.jsonl (one JSON line per check and rank, measurements included:
# measure_paths_row lines hold staged / GPUDirect / host timings at 3 KiB,
# 200 KiB and 1 MiB rows), log-*.txt (each run's output) and summary.txt.
# Exits 1 if any step failed, 2 if the bundle is missing, 3 without a GPU.
#
# GPU_CHECK_DRY_RUN=1: checks the bundle (files, unresolved shared objects)
# and every step's check selection (gpu_check.py --dry-run), runs nothing on
# a GPU; it works on machines without one.
set -u
cd "$(dirname "$0")/.."
root=$PWD
bundle=$root/build/gpu-bundle
OUT=${OUT:-$root/gpu-check-out}
mkdir -p "$OUT"
export OUT
PY=${PYTHON:-python3}
[ -d "$bundle/lib" ] || { echo "gpu-check: $bundle missing (carry build/gpu-bundle)" >&2; exit 2; }
for f in lib/libddstore.so.0 bin/mpiexec.hydra bin/hydra_pmi_proxy bin/test_gpu; do
    [ -e "$bundle/$f" ] || { echo "gpu-check: $bundle/$f missing (rebuild with make gpu-bundle)" >&2; exit 2; }
done
DRY=${GPU_CHECK_DRY_RUN:-0}
if [ "$DRY" != 1 ]; then
    # No GPU, no run: say so plainly instead of failing every step.
    if ! nvidia-smi -L > /dev/null 2>&1; then
        echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L fails); this check needs one (GPU_CHECK_DRY_RUN=1 checks the bundle only)" >&2
        exit 3
    fi
fi

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

# libfabric loads CUDA at run time by the unversioned names libcuda.so and
# libcudart.so, which a machine with only the driver and PyTorch's wheels
# lacks: a private directory links them to what is there.
if [ "$DRY" != 1 ]; then
    cudalinks=$OUT/cuda-links
    mkdir -p "$cudalinks"
    drv=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
    [ -n "$drv" ] && ln -sf "$drv" "$cudalinks/libcuda.so"
    rt=$("$PY" -c 'import glob, os, torch, nvidia; d=[os.path.dirname(torch.__file__)+"/lib"]+[p+"/cuda_runtime/lib" for p in nvidia.__path__]; print(next(iter(sorted(f for x in d for f in glob.glob(x+"/libcudart.so*"))), ""))' 2>/dev/null)
    [ -z "$rt" ] && rt=$(ldconfig -p 2>/dev/null | awk '/libcudart\.so/{print $NF; exit}')
    [ -n "$rt" ] && ln -sf "$rt" "$cudalinks/libcudart.so"
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cudalinks"
fi

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
if [ "$DRY" = 1 ] && grep -q "not found" <<<"$(ldd "$DDSTORE_LIBRARY"; ldd "$bundle/bin/test_gpu")"; then
    echo "gpu-check: the bundle has unresolved shared objects (see above)" >&2
    exit 2
fi

failed=0
budget=${GPU_CHECK_BUDGET_S:-330}
t_start=$SECONDS
summary() { echo "$1" | tee -a "$OUT/summary.txt"; }
step() {  # step NAME TIMEOUT COMMAND...
    local name=$1 t=$2; shift 2
    local left=$((budget - (SECONDS - t_start)))
    if [ "$DRY" = 1 ]; then
        echo "=== $name (timeout ${t}s): $*"
        if [[ " $* " == *" scripts/gpu_check.py "* ]]; then
            # The same environment, the Python part only, as a dry run.
            local args=() a
            for a in "$@"; do [ "$a" = mpiexec ] && break; args+=("$a"); done
            "${args[@]}" "$PY" scripts/gpu_check.py --dry-run "$name" || failed=$((failed + 1))
        fi
        return
    fi
    if [ "$left" -lt 20 ]; then
        summary "$name: SKIPPED (budget of ${budget}s spent)"
        failed=$((failed + 1))
        return
    fi
    [ "$t" -gt "$left" ] && t=$left
    echo "=== $name"
    local t0=$SECONDS
    if timeout -k 10 "$t" "$@" > "$OUT/log-$name.txt" 2>&1; then
        summary "$name: PASS ($((SECONDS - t0)) s)"
    else
        summary "$name: FAIL (rc $?, $((SECONDS - t0)) s)"
        failed=$((failed + 1))
    fi
    tail -25 "$OUT/log-$name.txt"
}

CORE=driver_and_classification,get_into_poisoned_gpu_tensor,back_to_back_200_reads_consumed_by_kernels,matrix_alloc_by_readback,large_rows_4096_floats,get_batch_gpu_vs_host,get_batch_async_into_gpu,get_batch_small_chunks,gpu_source_host_and_gpu_destinations,register_recv_gpu_tensor,threads_reading_into_gpu,stream_ordering,staging_off_refuses,every_byte_on_device
SHM="DDS_TEST_METHOD=1 DDSTORE_FABRIC=shm DDSTORE_NODE_LOCAL=0"

# 1. The C test with a driver present: classification, require, streams;
#    over shm (default GPUDirect=auto: shm is not asked for FI_HMEM) it sees
#    device_path = staged.
step c-test-method0 45 mpiexec -n "$NP" "$bundle/bin/test_gpu"
step c-test-method1-shm 45 env $SHM mpiexec -n "$NP" "$bundle/bin/test_gpu"

# 2. GPUDirect: shm with FI_HMEM (forced: auto does not ask shm for it; a
#    libfabric built without CUDA then fails every device read, and
#    gpudirect_serves_device_memory says so), 2 ranks on one GPU (reads
#    into device memory verified on the device, kernels consuming reads,
#    stream order, 4 threads, device sources).
step py-shm-gpudirect 150 env $SHM DDSTORE_GPU_DIRECT=1 GPU_CHECK_PATH=gpudirect GPU_CHECK_ONLY=$CORE,gpudirect_serves_device_memory \
    mpiexec -n "$NP" "$PY" scripts/gpu_check.py shm-gpudirect

# 3. Staged vs GPUDirect vs host destination at 3 KiB, 200 KiB, 1 MiB rows.
step py-measure-paths 90 env $SHM GPU_CHECK_ONLY=measure_paths mpiexec -n "$NP" "$PY" scripts/gpu_check.py measure-paths

# 4. The staged path: shm with GPUDirect off, then method 0 (MPI).
step py-shm-staged 120 env $SHM DDSTORE_GPU_DIRECT=0 GPU_CHECK_PATH=staged GPU_CHECK_ONLY=$CORE \
    mpiexec -n "$NP" "$PY" scripts/gpu_check.py shm-staged
step py-method0 90 env DDS_TEST_METHOD=0 GPU_CHECK_PATH=staged \
    GPU_CHECK_ONLY=driver_and_classification,get_into_poisoned_gpu_tensor,get_batch_gpu_vs_host,get_batch_async_into_gpu,get_batch_small_chunks,stream_ordering,staging_off_refuses,every_byte_on_device \
    mpiexec -n "$NP" "$PY" scripts/gpu_check.py method0

# 5. Stream-ordered vs device-synchronised batches, one rank (no second
#    process time-slicing the GPU).
step py-measure-np1 60 env DDS_TEST_METHOD=1 DDSTORE_FABRIC=tcp DDSTORE_NODE_LOCAL=0 \
    GPU_CHECK_ONLY=measure_stream_vs_device_sync mpiexec -n 1 "$PY" scripts/gpu_check.py measure-np1

summary "gpu-check: $failed failed step(s) in $((SECONDS - t_start)) s"
exit $((failed > 0))
