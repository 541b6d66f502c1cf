"""Package surface, store lifetime, profiling, and the HydraGNN/ORBIT-2/walrus
call patterns that are not about errors."""

import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import pyddstore as dds
from pyddstore import _lib
from helpers import RankChecks, METHODS, make_store, shards

PROFILE_KEYS = {"calls", "rows", "lock_wait", "mr", "mr_miss", "read", "cq", "py_gets", "py_get", "py_sync",
                "req_bytes_sent", "req_bytes_recv", "batch_mode", "batch_checks", "batch_calls_onesided"}


def test_import_does_not_start_mpi():
    code = ("import sys, pyddstore as d; assert 'mpi4py' not in sys.modules; "
            "d.PyDDStore; d.PyDDstoreVarinfo; assert 'mpi4py' not in sys.modules; "
            "assert d.__version__; print('clean')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "MPI", "HYDRA"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "clean" in out.stdout, out.stderr


def test_package_surface():
    assert {"PyDDStore", "PyDDstoreVarinfo", "__version__"} <= set(dds.__all__)
    assert isinstance(dds.__version__, str) and dds.__version__
    try:
        from importlib.metadata import version
        assert dds.__version__ == version("pyddstore")
    except Exception:
        assert dds.__version__ == "unknown"
    # Re-exported from the lazily loaded module, and (as in DDStore 3.0) without attributes.
    from pyddstore import _core
    assert dds.PyDDstoreVarinfo is _core.PyDDstoreVarinfo
    assert vars(dds.PyDDstoreVarinfo()) == {}
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        dds.nothing
    assert dds.library_version() == _lib.string(_lib.load().dds_version())
    assert hasattr(dds.PyDDStore, "get_batch")  # walrus tests for it this way


def test_library_is_cffi_from_the_header():
    """The binding is cffi's (which releases the GIL around every C call, as
    test_gil_is_released_while_waiting shows), declared by the generated module."""
    lib = _lib.load()
    assert type(lib).__module__ in ("_cffi_backend", "cffi.api"), type(lib)
    assert _lib.FFI_SOURCE == "generated", "run python-ctypes/pyddstore/_ffi_build.py (run-tests.sh does)"
    assert set(_lib.REQUIRED) >= {"dds_get", "dds_get_batch", "dds_create", "dds_destroy"}


@pytest.mark.parametrize("method", METHODS)
def test_gil_is_released_while_waiting(comm, method):
    """A Python thread keeps running while this rank waits inside a collective
    library call for a late peer."""
    store = make_store(comm, method)
    ticks, stop = [0], threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    if comm.rank == comm.size - 1:
        time.sleep(0.5)  # the others wait for this rank in epoch_begin
    before = ticks[0]
    store.epoch_begin()
    during = ticks[0] - before
    stop.set()
    thread.join()
    store.epoch_end()
    store.free()
    ck = RankChecks(comm)
    ck(comm.size == 1 or comm.rank == comm.size - 1 or during >= 20, 'comm.size == 1 or comm.rank == comm.size - 1 or during >= 20')
    ck.done(f"rank {comm.rank}: {during} ticks while waiting")


@pytest.mark.parametrize("method", METHODS)
def test_several_stores_alive(comm, method):
    """HydraGNN: stores on the world and on a split sub-communicator together."""
    sub = comm.Split(comm.rank % 2, comm.rank)
    a = make_store(comm, method)
    b = make_store(sub, method)
    a.add("v", np.full((2, 2), comm.rank, np.int64))
    b.add("v", np.full((3, 2), 100 + comm.rank, np.int64))
    ck = RankChecks(comm)
    ck(a.info("v") == (2 * comm.size, 2, 8) and b.info("v") == (3 * sub.size, 2, 8), 'a.info("v") == (2 * comm.size, 2, 8) and b.info("v") == (3 * sub.size, 2, 8)')
    out = np.empty((1, 2), np.int64)
    a.epoch_begin()
    b.epoch_begin()
    a.get("v", out, 2 * comm.size - 1)
    ck(bool((out == comm.size - 1).all()), 'bool((out == comm.size - 1).all())')
    b.get("v", out, 0)
    ck(bool((out == 100 + (comm.rank % 2)).all()), 'bool((out == 100 + (comm.rank % 2)).all())')
    b.epoch_end()
    a.epoch_end()
    b.free()
    a.free()
    sub.Free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_free_by_garbage_collection(comm, method):
    store = make_store(comm, method)
    store.add("x", np.zeros((2, 2), np.float32))
    del store
    gc.collect()
    again = make_store(comm, method)  # the world is not stuck in a half-freed store
    again.add("x", np.ones((2, 2), np.float32))
    again.free()


@pytest.mark.parametrize("method", METHODS)
def test_context_manager(comm, method):
    with make_store(comm, method) as store:
        store.add("x", np.zeros((1, 1), np.float32))
    with pytest.raises(RuntimeError, match="freed"):
        store.info("x")
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_profile_keys_and_counts(comm, method, monkeypatch):
    monkeypatch.setenv("DDSTORE_PROFILE", "1")
    store = make_store(comm, method)
    store.add("x", np.arange(8 * comm.size, dtype=np.float64).reshape(-1, 2)[4 * comm.rank:4 * comm.rank + 4])
    p = store.get_profile("x")
    assert set(p) == PROFILE_KEYS
    assert p["calls"] == 0 and p["py_gets"] == 0
    # No auto mode here: no checks, and the store's own mode.
    assert p["batch_checks"] == 0 and p["batch_mode"] in ("collective", "onesided")
    out = np.empty((2, 2), np.float64)
    store.epoch_begin()
    store.get("x", out, 0)
    store.get_batch("x", out, [1, 4 * comm.size - 1])
    store.epoch_end()
    p = store.get_profile("x")
    ck = RankChecks(comm)
    # One get of 2 rows and one batch of 2 rows: exactly 2 calls, 4 rows.
    ck(p["calls"] == 2, f"calls {p['calls']} after one get and one get_batch")
    ck(p["rows"] == 4, f"rows {p['rows']} after reading 2 + 2 rows")
    ck(p["py_gets"] == 2, f"py_gets {p['py_gets']}")
    ck(p["py_get"] > 0, f"py_get {p['py_get']} after two timed reads")
    ck(p["py_sync"] == 0.0, f"py_sync {p['py_sync']}")
    store.free()
    monkeypatch.delenv("DDSTORE_PROFILE")
    quiet = make_store(comm, method)
    quiet.add("x", np.zeros((1, 1), np.float32))
    quiet.get("x", np.empty((1, 1), np.float32), 0)
    ck(quiet.get_profile("x")["py_gets"] == 0, "py_gets counted with DDSTORE_PROFILE unset")
    quiet.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_orbit2_images(comm, method):
    """ORBIT-2: add (N, C, H, W) float32, get into (1, C, H, W)."""
    n, c, h, w = 3, 2, 4, 5
    local = np.random.default_rng(comm.rank).random((n, c, h, w), dtype=np.float32)
    whole = shards(comm, local)
    store = make_store(comm, method)
    store.add("images", local)
    ck = RankChecks(comm)
    ck(store.info("images") == (n * comm.size, c * h * w, 4), 'store.info("images") == (n * comm.size, c * h * w, 4)')
    out = np.empty((1, c, h, w), np.float32)
    store.epoch_begin()
    for g in range(whole.shape[0]):
        store.get("images", out, np.int64(g))
        ck(np.array_equal(out[0], whole[g]), 'np.array_equal(out[0], whole[g])')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_walrus_style(comm, method):
    """init / update / register_recv / get_batch (found with hasattr) / get_profile."""
    store = make_store(comm, method)
    store.init("field", 5, 6, itemsize=8)
    for r in range(5):
        store.update("field", np.full((1, 6), 10.0 * comm.rank + r), r)
    store.epoch_begin()
    pool = np.zeros((8, 6), np.float64)
    store.register_recv("field", pool)
    idx = np.array([5 * comm.size - 1, 0, 3], np.int64)
    if hasattr(store, "get_batch"):
        store.get_batch("field", pool[2:5], indices=idx)
    store.get(name="field", arr=pool[:1], start=int(idx[0]))
    want = np.array([10.0 * (i // 5) + i % 5 for i in idx])[:, None] * np.ones(6)
    ck = RankChecks(comm)
    ck(np.array_equal(pool[2:5], want) and np.array_equal(pool[0], want[0]), 'np.array_equal(pool[2:5], want) and np.array_equal(pool[0], want[0])')
    store.unregister_recv("field", pool)
    ck(set(store.get_profile("field")) == PROFILE_KEYS, 'set(store.get_profile("field")) == PROFILE_KEYS')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_large_uint8_column(comm, method):
    """HydraGNN packs records into one 1-D uint8 variable and reads byte ranges."""
    n = 3_000_000 + 17 * comm.rank
    local = (np.arange(n) % 251).astype(np.uint8)
    first = comm.exscan(n) or 0
    store = make_store(comm, method)
    store.add("blob", local)
    total, disp, itemsize = store.info("blob")
    ck = RankChecks(comm)
    ck((total, disp, itemsize) == (comm.allreduce(n), 1, 1), '(total, disp, itemsize) == (comm.allreduce(n), 1, 1)')
    nxt = (comm.rank + 1) % comm.size
    start = comm.allgather(first)[nxt] + 1000
    out = np.empty(500_000, np.uint8)
    store.epoch_begin()
    store.get("blob", out, np.int64(start))
    store.epoch_end()
    ck(np.array_equal(out, (np.arange(1000, 501000) % 251).astype(np.uint8)), 'np.array_equal(out, (np.arange(1000, 501000) % 251).astype(np.uint8))')
    store.free()
    ck.done()
