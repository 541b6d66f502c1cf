"""Device checks of libddstore's GPU paths, run by scripts/gpu-check.sh under
mpiexec on a machine with an NVIDIA GPU and PyTorch (see docs/gpu.md).

`python gpu_check.py --dry-run [TAG]` imports neither torch nor MPI: it
lists the checks GPU_CHECK_ONLY selects (and fails on a name that is not a
check), so the selection of every step is verified on machines without a GPU.

No mpi4py: MPI is started through ctypes on the libmpich that libddstore
links, and the store gets MPI_COMM_WORLD's Fortran handle. Each check writes
one JSON line per rank to $OUT/checks-<tag>.jsonl; rank 0 prints a closing
"N passed, N failed" line. Usage: python gpu_check.py TAG
"""

import ctypes
import json
import os
import sys
import threading
import time
import traceback

DRY_RUN = "--dry-run" in sys.argv
if DRY_RUN:
    sys.argv.remove("--dry-run")
else:
    import numpy as np
    import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python-ctypes"))
TAG = sys.argv[1] if len(sys.argv) > 1 else "run"
OUT = os.environ.get("OUT", ".")
METHOD = int(os.environ.get("DDS_TEST_METHOD", "0"))
# The path device destinations must take in this run (dds_var_info.device_path):
# "staged" or "gpudirect" (scripts/gpu-check.sh sets it per step).
WANT_PATH = os.environ.get("GPU_CHECK_PATH", "staged")


def _dry_run():
    names = [fn.__name__ for fn in CHECKS]
    only = [n for n in os.environ.get("GPU_CHECK_ONLY", "").split(",") if n]
    bad = [n for n in only if n not in names]
    if bad:
        print(f"gpu_check {TAG}: GPU_CHECK_ONLY names no check: {', '.join(bad)}", file=sys.stderr)
        sys.exit(2)
    picked = [n for n in names if not only or n in only]
    print(f"gpu_check {TAG} (dry run, path {WANT_PATH}): {', '.join(picked)}")
    sys.exit(0)


if not DRY_RUN:
    import pyddstore as dds  # noqa: E402
    from pyddstore import _lib  # noqa: E402

    # -- MPI through ctypes (MPICH handles) ----------------------------------------
    _mpi = ctypes.CDLL("libmpich.so.12", mode=ctypes.RTLD_GLOBAL)
    WORLD, MPI_INT, MPI_MIN, MPI_SUM = 0x44000000, 0x4c000405, 0x58000002, 0x58000003
    _provided = ctypes.c_int(0)
    _mpi.MPI_Init_thread(None, None, 3, ctypes.byref(_provided))
    _r, _n = ctypes.c_int(), ctypes.c_int()
    _mpi.MPI_Comm_rank(WORLD, ctypes.byref(_r))
    _mpi.MPI_Comm_size(WORLD, ctypes.byref(_n))
    RANK, SIZE = _r.value, _n.value

    class World:
        size, rank = SIZE, RANK

        def py2f(self):
            return WORLD  # MPICH: the Fortran handle is the C handle

    def barrier():
        _mpi.MPI_Barrier(WORLD)

    def allreduce(v, op):
        a, b = ctypes.c_int(int(v)), ctypes.c_int(0)
        _mpi.MPI_Allreduce(ctypes.byref(a), ctypes.byref(b), 1, MPI_INT, op, WORLD)
        return b.value

    torch.cuda.set_device(RANK % torch.cuda.device_count())
    DEV = torch.device("cuda", torch.cuda.current_device())
    _log = open(os.path.join(OUT, f"checks-{TAG}.jsonl"), "a")
    results = {"passed": 0, "failed": 0}


def record(name, ok, **detail):
    line = {"tag": TAG, "method": METHOD, "check": name, "rank": RANK, "ok": bool(ok), **detail}
    _log.write(json.dumps(line) + "\n")
    _log.flush()


def check(fn):
    """Runs one check on every rank; a check passes when it passes everywhere."""
    name = fn.__name__
    t0 = time.perf_counter()
    try:
        detail = fn() or {}
        ok, err = True, None
    except Exception as e:  # reported, never fatal: the next check still runs
        ok, detail, err = False, {}, f"{type(e).__name__}: {e}"
        traceback.print_exc()
    ms = (time.perf_counter() - t0) * 1e3
    record(name, ok, ms=round(ms, 2), error=err, **detail)
    all_ok = allreduce(ok, MPI_MIN)
    results["passed" if all_ok else "failed"] += 1
    if RANK == 0:
        print(f"[{TAG}] {name}: {'ok' if all_ok else 'FAILED'} ({ms:.0f} ms)", flush=True)
    barrier()


def store(**env):
    """A store of this run's method; `env` applies only while it is created."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        return dds.PyDDStore(World(), method=METHOD)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


ROWS, COLS = 8, 4  # DDStore's test_gpu_rdma shards: 8 x 4 float32 filled with rank+1


def shard_store(cols=COLS, **env):
    s = store(**env)
    s.add("x", np.full((ROWS, cols), RANK + 1, np.float32))
    barrier()
    return s


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# -- checks ---------------------------------------------------------------------

def driver_and_classification():
    lib, ffi = _lib.load(), _lib.ffi  # raw calls: cffi objects (pyddstore's binding)
    n = ffi.new("int32_t *", 0)
    st = lib.dds_gpu_available(n)
    expect(st == 0 and n[0] >= 1, f"dds_gpu_available -> {st}, {_lib.last_error(lib)}")
    kind, dev = ffi.new("int32_t *", -1), ffi.new("int32_t *", -1)
    t = torch.empty(1024, device=DEV)
    lib.dds_pointer_kind(ffi.cast("void *", t.data_ptr()), kind, dev)
    expect((kind[0], dev[0]) == (1, DEV.index), f"device tensor: kind {kind[0]} dev {dev[0]}")
    for what, h in (("pinned", torch.empty(1024).pin_memory()), ("pageable", torch.empty(1024)),
                    ("numpy", torch.from_numpy(np.zeros(64)))):
        lib.dds_pointer_kind(ffi.cast("void *", h.data_ptr()), kind, dev)
        expect(kind[0] == 0, f"{what} host tensor classified {kind[0]}")
    s = shard_store()
    info = ffi.new("dds_var_info *")
    info.struct_size = ffi.sizeof("dds_var_info")
    lib.dds_info(s._h, b"x", info)
    s.free()
    want = {"staged": _lib.DDS_PATH_STAGED, "gpudirect": _lib.DDS_PATH_GPUDIRECT}[WANT_PATH]
    transport = _lib.ffi.string(info.transport).decode()
    expect(info.device_path == want, f"device_path {info.device_path}, want {WANT_PATH} ({transport})")
    return {"devices": n[0], "device_path": info.device_path, "transport": transport}


def gpudirect_serves_device_memory():
    """On the GPUDirect path: a read into a device tensor is served by the
    provider itself. A provider that reports FI_HMEM but refuses CUDA memory
    (a libfabric built without CUDA) makes the store stage instead; this check
    then fails and says so, so the other checks of the run are not mistaken
    for GPUDirect ones."""
    s = shard_store()
    d = torch.zeros((1, COLS), device=DEV)
    s.get("x", d, 0)
    expect(bool((d == 1).all()), f"read into a device tensor: {d.tolist()}")
    path = s.device_path("x")
    s.free()
    expect(path == "gpudirect", f"device_path is {path!r} after a read: the provider refused CUDA memory "
           "(its libfabric was built without CUDA), so GPUDirect is NOT exercised by this run; reads were staged")
    return {"device_path": path}


def get_into_poisoned_gpu_tensor():
    s = shard_store()
    for r in range(SIZE):
        for row in range(ROWS):
            d = torch.full((1, COLS), -999.0, device=DEV)
            s.get("x", d, r * ROWS + row)
            torch.cuda.current_stream().synchronize()
            expect(bool((d == r + 1).all()), f"rank {r} row {row}: {d.tolist()}")
    s.free()


def back_to_back_200_reads_consumed_by_kernels():
    s = shard_store()
    total = torch.zeros((), device=DEV)
    for i in range(200):
        d = torch.empty((1, COLS), device=DEV)
        g = (i * 5) % (SIZE * ROWS)
        s.get("x", d, g)
        total += (d * 2).sum()  # a kernel reading the rows on the current stream
    want = sum(((i * 5) % (SIZE * ROWS)) // ROWS + 1 for i in range(200)) * 2 * COLS
    got = float(total.item())
    barrier()
    s.free()
    expect(got == want, f"sum {got} != {want}")


def matrix_alloc_by_readback():
    s = shard_store()
    peer = (RANK + 1) % SIZE
    for alloc in ("empty", "poisoned_by_kernel"):
        for readback in ("to_host", "kernel"):
            d = torch.empty((ROWS, COLS), device=DEV)
            if alloc == "poisoned_by_kernel":
                d.fill_(-999.0)
            s.get("x", d, peer * ROWS)
            if readback == "to_host":
                ok = bool((d.cpu() == peer + 1).all())
            else:
                ok = bool(((d - (peer + 1)).abs().max() == 0).item())
            expect(ok, f"{alloc} x {readback}")
    s.free()


def large_rows_4096_floats():
    s = store()
    s.add("big", np.full((4, 4096), RANK + 1, np.float32))
    barrier()
    for r in range(SIZE):
        d = torch.full((4, 4096), -999.0, device=DEV)
        s.get("big", d, r * 4)
        expect(bool((d == r + 1).all()), f"rank {r}")
    s.free()


def get_batch_gpu_vs_host():
    s = store()
    rows = 37
    data = np.arange(rows * 6, dtype=np.float64).reshape(rows, 6) + 1000 * RANK
    s.add("b", data)
    barrier()
    total = rows * SIZE
    rng = np.random.default_rng(RANK)
    for trial in range(5):
        idx = rng.integers(0, total, size=64)
        h = np.zeros((64, 6))
        s.get_batch("b", h, idx)
        d = torch.full((64, 6), -1.0, dtype=torch.float64, device=DEV)
        s.get_batch("b", d, idx)
        expect(torch.equal(d, torch.from_numpy(h).to(DEV)), f"trial {trial}")  # compared on the device
    # Empty batch on a device tensor, and a zero-row tensor.
    s.get_batch("b", torch.empty((0, 6), dtype=torch.float64, device=DEV), np.zeros(0, np.int64))
    s.free()


def get_batch_async_into_gpu():
    # Requests into device tensors (staged even on a GPUDirect store: the
    # wait copies the request's host rows to the device), three in flight,
    # waited for in reverse order, compared on the device with host reads.
    s = store()
    rows = 41
    s.add("a", np.arange(rows * 5, dtype=np.float32).reshape(rows, 5) + 10**4 * RANK)
    barrier()
    rng = np.random.default_rng(7 + RANK)
    idx = [rng.integers(0, rows * SIZE, size=48) for _ in range(3)]
    host = [np.zeros((48, 5), np.float32) for _ in idx]
    for h, i in zip(host, idx):
        s.get_batch("a", h, i)
    dev = [torch.full((48, 5), -1.0, device=DEV) for _ in idx]
    reqs = [s.get_batch_async("a", d, i) for d, i in zip(dev, idx)]
    for r in reversed(reqs):
        r.wait()
    for k, (d, h) in enumerate(zip(dev, host)):
        expect(torch.equal(d, torch.from_numpy(h).to(DEV)), f"request {k}")
    s.free()


def get_batch_small_chunks():
    # 64-byte bounce chunks: many chunks per batch (methods 1/2) and the
    # pool's reuse-after-event path.
    s = store(DDSTORE_GPU_STAGING_BYTES=64)
    rows = 50
    s.add("c", (np.arange(rows * 8, dtype=np.int64).reshape(rows, 8) + 10**6 * RANK))
    barrier()
    idx = np.arange(rows * SIZE)[::-1].copy()
    h = np.zeros((len(idx), 8), np.int64)
    s.get_batch("c", h, idx)
    d = torch.zeros((len(idx), 8), dtype=torch.int64, device=DEV)
    s.get_batch("c", d, idx)
    expect(np.array_equal(d.cpu().numpy(), h), "chunked batch differs")
    d2 = torch.zeros((rows, 8), dtype=torch.int64, device=DEV)
    s.get("c", d2, ((RANK + 1) % SIZE) * rows)  # single get, chunked
    expect(np.array_equal(d2.cpu().numpy(), h[::-1][((RANK + 1) % SIZE) * rows:][:rows]), "chunked get differs")
    s.free()


def gpu_source_host_and_gpu_destinations():
    s = store()
    src = torch.full((ROWS, COLS), float(RANK + 1), device=DEV)
    src.mul_(10)  # queued kernel: add must see its result
    s.add("g", src)
    s.update("g", torch.full((1, COLS), 7.0, device=DEV), 0)
    barrier()
    for r in range(SIZE):
        h = np.zeros((ROWS, COLS), np.float32)
        s.get("g", h, r * ROWS)
        want = np.full((ROWS, COLS), 10.0 * (r + 1), np.float32)
        want[0] = 7
        expect(np.array_equal(h, want), f"host dst rank {r}: {h[:2]}")
        d = torch.zeros((ROWS, COLS), device=DEV)
        s.get("g", d, r * ROWS)
        expect(np.array_equal(d.cpu().numpy(), want), f"gpu dst rank {r}")
    s.free()


def register_recv_gpu_tensor():
    s = shard_store()
    d = torch.zeros((ROWS, COLS), device=DEV)
    s.register_recv("x", d)
    s.get("x", d, ((RANK + 1) % SIZE) * ROWS)
    expect(bool((d == (RANK + 1) % SIZE + 1).all()), "read into registered tensor")
    s.unregister_recv("x", d)
    s.free()


def threads_reading_into_gpu():
    if METHOD == 0 and _provided.value < 3:
        return {"note": "MPI lacks THREAD_MULTIPLE"}
    s = shard_store()
    errors = []

    def work(t):
        try:
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                for i in range(50):
                    g = (t * 7 + i) % (SIZE * ROWS)
                    d = torch.full((1, COLS), -5.0, device=DEV)
                    s.get("x", d, g)
                    if not bool((d == g // ROWS + 1).all()):
                        errors.append((t, i, d.tolist()))
        except Exception as e:
            errors.append(repr(e))

    ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    barrier()
    s.free()
    expect(not errors, f"{errors[:3]}")


def stream_ordering():
    """A read on a stream lands after the work queued before it on that
    stream, and work queued after it sees the rows."""
    s = shard_store()
    peer = (RANK + 1) % SIZE
    side = torch.cuda.Stream()
    a = torch.randn(4096, 4096, device=DEV)
    d = torch.zeros((ROWS, COLS), device=DEV)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(30):
            a = a @ a * 1e-3  # keeps the stream busy for tens of ms
        d.fill_(-1.0)  # queued before the read: must be overwritten by it
        s.get("x", d, peer * ROWS)  # returns without waiting for the stream
        after = d * 3  # queued after the read
    side.synchronize()
    expect(bool((d == peer + 1).all()), f"read was overtaken: {d[0].tolist()}")
    expect(bool((after == 3 * (peer + 1)).all()), "kernel after the read saw stale rows")
    s.free()


def staging_off_refuses():
    s = shard_store(DDSTORE_GPU_STAGING=0)
    want = "method" if METHOD == 0 else "cxi"
    if WANT_PATH == "gpudirect":
        # GPUDirect needs no staging: the read is served, straight into the
        # tensor, unless the provider refuses CUDA memory (a libfabric built
        # without it: gpudirect_serves_device_memory fails for that), when
        # the refusal must say so.
        d = torch.zeros((1, COLS), device=DEV)
        try:
            s.get("x", d, 0)
            expect(bool((d == 1).all()), f"GPUDirect read with staging off: {d.tolist()}")
        except dds.GPUError as e:
            expect("built without" in str(e) and s.device_path("x") != "gpudirect", str(e))
    else:
        try:
            s.get("x", torch.zeros((1, COLS), device=DEV), 0)
            raise AssertionError("get into a GPU tensor was accepted with DDSTORE_GPU_STAGING=0")
        except dds.GPUError as e:
            # A provider with FI_HMEM that refused the registration names itself instead.
            expect(want in str(e) or "could not be registered for GPUDirect" in str(e), str(e))
    try:
        s.add("y", torch.zeros((2, COLS), device=DEV))
        raise AssertionError("add of a GPU tensor was accepted with DDSTORE_GPU_STAGING=0")
    except dds.GPUError as e:
        expect("DDSTORE_GPU_STAGING=0" in str(e), str(e))
    h = np.zeros((1, COLS), np.float32)
    s.get("x", h, 0)  # still usable
    s.free()


def measure_stream_vs_device_sync():
    """Per-batch time of a get_batch into GPU memory while another stream is
    busy: ordered on the caller's stream (the default in pyddstore) versus
    DDStore's whole-device synchronisation before each batch."""
    s = store()
    rows, width = 256, 256  # 1 KiB float32 rows
    s.add("m", np.full((rows, width), RANK, np.float32))
    barrier()
    lib = _lib.load()
    total = rows * SIZE
    rng = np.random.default_rng(7 + RANK)
    batches = [rng.integers(0, total, size=32) for _ in range(60)]
    dst = torch.empty((32, width), device=DEV)
    busy = torch.cuda.Stream()
    a = torch.randn(4096, 4096, device=DEV)
    mine = torch.cuda.Stream()

    def keep_busy():
        with torch.cuda.stream(busy):
            for _ in range(40):
                torch.mm(a, a)

    def timed(mode):
        times = []
        keep_busy()
        with torch.cuda.stream(mine):
            for idx in batches:
                if busy.query():
                    keep_busy()
                t0 = time.perf_counter()
                if mode == "stream":
                    s.get_batch("m", dst, idx)
                    dst.sum()  # consumer kernel on the same stream
                elif mode == "device_sync":
                    torch.cuda.synchronize()  # DDStore 3.0's order
                    i64 = np.ascontiguousarray(idx, np.int64)
                    rc = lib.dds_get_batch(s._h, b"m", _lib.ffi.cast("void *", dst.data_ptr()), dst.numel() * 4,
                                           _lib.ffi.from_buffer("int64_t[]", i64), len(i64))
                    expect(rc == 0, _lib.last_error(lib))
                    dst.sum()
                else:  # host destination, for reference
                    s.get_batch("m", hbuf, idx)
                times.append(time.perf_counter() - t0)
        mine.synchronize()
        busy.synchronize()
        return times

    hbuf = np.empty((32, width), np.float32)
    out = {}
    for rep in range(2):  # interleaved, twice
        for mode in ("stream", "device_sync", "host"):
            t = timed(mode)[5:]  # drop warm-up
            out.setdefault(mode, []).extend(t)
    summary = {m: {"median_us": round(float(np.median(v)) * 1e6, 1),
                   "p90_us": round(float(np.percentile(v, 90)) * 1e6, 1), "n": len(v)} for m, v in out.items()}
    s.free()
    return {"batch_rows": 32, "row_bytes": width * 4, "per_batch": summary}


def _rank_bytes(r, rows, width):
    """Rank r's shard of the byte variable: reproducible on every rank."""
    return np.random.default_rng(1000 + r).integers(0, 256, size=(rows, width), dtype=np.uint8)


def every_byte_on_device():
    """Random bytes in rows of 3 KiB, 200 KiB and 1 MiB + 5 (odd sizes, no
    alignment help), read singly and in batches (reversed, repeated, every
    rank's rows) into device tensors and compared byte for byte on the
    device against the expected rows uploaded from the host; the same reads
    into host memory for reference."""
    out = {}
    for width, rows in ((3 * 1024, 16), (200 * 1024, 4), ((1 << 20) + 5, 2)):
        s = store()
        s.add("u", _rank_bytes(RANK, rows, width))
        barrier()
        every = np.concatenate([_rank_bytes(r, rows, width) for r in range(SIZE)])
        want_dev = torch.from_numpy(every).to(DEV)
        idx = np.concatenate([np.arange(len(every))[::-1], np.arange(len(every))[: min(5, len(every))]])
        d = torch.full((len(idx), width), 0xAB, dtype=torch.uint8, device=DEV)
        s.get_batch("u", d, idx)
        expect(torch.equal(d, want_dev[torch.from_numpy(idx).to(DEV)]), f"batch of {width}-byte rows")
        for g in range(len(every)):
            one = torch.full((1, width), 0xCD, dtype=torch.uint8, device=DEV)
            s.get("u", one, g)
            expect(torch.equal(one[0], want_dev[g]), f"row {g} of {width} bytes")
        h = np.zeros((len(idx), width), np.uint8)
        s.get_batch("u", h, idx)
        expect(np.array_equal(h, every[idx]), f"host batch of {width}-byte rows")
        out[str(width)] = s.device_path("u")
        s.free()
    return {"paths": out}


def measure_paths():
    """Per-batch time of get_batch of 16 rows at 3 KiB, 200 KiB and 1 MiB
    into device memory staged (DDSTORE_GPU_DIRECT=0), GPUDirect (auto; where
    the provider serves it) and into host memory, interleaved in one run.
    One JSON line per (path, row size) in checks-<tag>.jsonl."""
    batch, reps = 16, 30
    for width in (3 * 1024, 200 * 1024, 1 << 20):
        rows = 32
        stores = {"staged": store(DDSTORE_GPU_DIRECT=0), "gpudirect": store(DDSTORE_GPU_DIRECT="auto")}
        for st in stores.values():
            st.add("p", np.full((rows, width), RANK + 1, np.uint8))
        barrier()
        rng = np.random.default_rng(3 + RANK)
        # Remote rows only: the peer's shard.
        peer = (RANK + 1) % SIZE
        batches = [rng.integers(peer * rows, (peer + 1) * rows, size=batch) for _ in range(reps)]
        dst = torch.empty((batch, width), dtype=torch.uint8, device=DEV)
        hbuf = np.empty((batch, width), np.uint8)
        times = {"staged": [], "gpudirect": [], "host": []}
        paths = {k: st.device_path("p") for k, st in stores.items()}
        for i, idx in enumerate(batches):
            for mode in ("staged", "gpudirect", "host"):
                st = stores["staged" if mode == "host" else mode]
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if mode == "host":
                    st.get_batch("p", hbuf, idx)
                else:
                    st.get_batch("p", dst, idx)
                    torch.cuda.current_stream().synchronize()  # the rows are usable on the device
                dt = time.perf_counter() - t0
                if i >= 3:  # warm-up dropped
                    times[mode].append(dt)
                if mode != "host" and i == 0:
                    expect(bool((dst == peer + 1).all()), f"{mode} rows at {width} bytes")
        for mode, v in times.items():
            record("measure_paths_row", True, row_bytes=width, batch_rows=batch, mode=mode,
                   device_path=paths.get(mode, "host"), n=len(v),
                   median_us=round(float(np.median(v)) * 1e6, 1), p90_us=round(float(np.percentile(v, 90)) * 1e6, 1),
                   gib_per_s=round(batch * width / float(np.median(v)) / 2**30, 3))
        for st in stores.values():
            st.free()
        barrier()
    return {"row_sizes": [3 * 1024, 200 * 1024, 1 << 20], "paths": paths}


def torch_dataset_on_device():
    # pyddstore.torch needs mpi4py, which must be built against the bundle's
    # MPICH: importing another MPI's mpi4py here would break the process.
    if os.environ.get("GPU_CHECK_TORCH_DATASET") != "1":
        return {"skipped": "set GPU_CHECK_TORCH_DATASET=1 where mpi4py is built against MPICH"}
    from mpi4py import MPI
    from pyddstore.torch import DistDataset
    samples = [torch.full((3,), float(i)) for i in range(16)]
    ds = DistDataset(samples, "tds", comm=MPI.COMM_WORLD, device=DEV, add_device=DEV, method=METHOD)
    items = ds.__getitems__(list(range(16)))
    for i, v in enumerate(items):
        expect(v.is_cuda and bool((v == i).all()), f"sample {i}: {v}")
    ds.ddstore.free()


CHECKS = [driver_and_classification, gpudirect_serves_device_memory, get_into_poisoned_gpu_tensor, back_to_back_200_reads_consumed_by_kernels,
          matrix_alloc_by_readback, large_rows_4096_floats, get_batch_gpu_vs_host, get_batch_async_into_gpu,
          get_batch_small_chunks, gpu_source_host_and_gpu_destinations, register_recv_gpu_tensor, threads_reading_into_gpu,
          stream_ordering, staging_off_refuses, every_byte_on_device, measure_stream_vs_device_sync, measure_paths,
          torch_dataset_on_device]

if __name__ == "__main__":
    if DRY_RUN:
        _dry_run()
    only = os.environ.get("GPU_CHECK_ONLY")
    for fn in CHECKS:
        if only and fn.__name__ not in only.split(","):
            continue
        check(fn)
    if RANK == 0:
        print(f"gpu_check {TAG}: {results['passed']} passed, {results['failed']} failed", flush=True)
    _log.close()
    _mpi.MPI_Finalize()
    sys.exit(1 if results["failed"] else 0)
