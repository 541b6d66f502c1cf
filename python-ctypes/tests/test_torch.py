"""DDStore 3.0's test_torch, ported: DistDataset, the loaders over it,
WindowedDataset and row_of, on every method the library serves.

Every rank runs every test; method 0's batched reads are collective, so
every rank makes the same sequence of batched reads (with its own indices).
Checks are collected and agreed on at the end (torch_helpers.Checks), after
the store is freed, so a failure on one rank cannot leave the others waiting.
"""

import copy
import os

import numpy as np
import pytest
import torch
from torch.utils.data import ConcatDataset, DataLoader, default_collate

from helpers import agree
from pyddstore.torch import DistDataset, ThreadDataLoader, WindowedDataset, row_of
from torch_helpers import (
    METHODS, N, REC, SOURCES, Checks, DictSource, Labeled, RecordSource, TupleSource,
    decode_labeled, ds_kwargs, encode_labeled, expected_labeled, teardown, threads_for,
)

CHUNKS = [None, 1, 4]
LOADERS = ["DataLoader", "ThreadDataLoader"]


def make(comm, source, method, name=None, **kw):
    return DistDataset(source, name or f"t{method}", comm=comm, **ds_kwargs(method, **kw))


def field_keys(ds):
    shapes = ds.shapes
    if isinstance(shapes, dict):
        return list(shapes)
    if ds.schema["structure"] == "single":
        return [0]
    return list(range(len(shapes)))


def leaf(sample, key):
    if isinstance(sample, (dict, tuple, list)):
        return sample[key]
    return sample


def stacked(values):
    """What a stored column of these values reads back as."""
    if isinstance(values[0], torch.Tensor):
        return torch.stack(values)
    if isinstance(values[0], np.void):
        return np.array(values, dtype=values[0].dtype)
    return np.stack([np.asarray(v) for v in values])


def ref_columns(src, rows, keys):
    return {k: stacked([leaf(src[int(r)], k) for r in rows]) for k in keys}


def loader_for(kind, ds, method, **kw):
    if kind == "DataLoader":
        return DataLoader(ds, **kw)
    return ThreadDataLoader(ds, num_workers=threads_for(method), **kw)


def mr_misses(ds):
    return sum(ds.ddstore.get_profile(v)["mr_miss"] for v in ds.variables)


def count_registrations(monkeypatch):
    """Methods 1/2 register every read destination that no registered buffer
    covers, and count it in mr_miss (rows of ranks on this node are read
    over the fabric too): "no new registrations" then means something."""
    monkeypatch.setenv("DDSTORE_TEST_FABRIC_LOCAL_MR", "1")
    monkeypatch.setenv("DDSTORE_NODE_LOCAL", "0")


def check_misses_counted(c, ds, method):
    """An unregistered destination does count (methods 1/2; none for method 0)."""
    before = mr_misses(ds)
    ds.read_rows(np.arange(N)[::-1])
    if method != 0 and ds.ddstore_comm.size > 1:
        c.true(mr_misses(ds) > before, "a fresh destination was not counted in mr_miss")


def start_address(x):
    if isinstance(x, torch.Tensor):
        return x.data_ptr()
    return np.asarray(x).__array_interface__["data"][0]


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", list(SOURCES))
def test_items_match_source(comm, kind, method, chunk):
    src = SOURCES[kind]()
    ds = make(comm, src, method, chunk_size=chunk)
    c = Checks()
    c.true(len(ds) == N and ds.len() == N, f"length {len(ds)}")
    for i in (0, 1, N // 2, N - 2, N - 1):
        c.same(ds[i], src[i], f"ds[{i}]")
    for i in (-1, N):  # not wrapped: the store refuses them
        c.raises(IndexError, lambda: ds[i], f"ds[{i}]")
    idx = np.random.default_rng(comm.rank).integers(0, N, 20)
    c.same(ds.__getitems__(idx), [src[int(i)] for i in idx], "__getitems__")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
def test_shapes_and_dtypes(comm, method):
    ds = make(comm, DictSource(), method)
    tds = make(comm, TupleSource(), method, name="tt")
    c = Checks()
    c.true(ds.shapes == {"x": (2, 3), "y": ()}, f"shapes {ds.shapes}")
    c.true(ds.dtypes == {"x": "float32", "y": "int64"}, f"dtypes {ds.dtypes}")
    c.true(tds.shapes == ((3, 4), (), (2,), (), (), (), (2,)), f"tuple shapes {tds.shapes}")
    c.true(tds.dtypes == ("float32", "int64", "float64", "int32", "bool", "float64", "uint8"),
           f"tuple dtypes {tds.dtypes}")
    c.true(ds.variables == [f"t{method}/x", f"t{method}/y"], f"variables {ds.variables}")
    c.true(ds.ddstore.info(f"t{method}/x") == (N, 6, 4), "variable t/x")
    teardown(comm, tds)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("loader", LOADERS)
def test_loaders_match_plain_source(comm, loader, method):
    src = TupleSource()
    ds = make(comm, src, method)
    ref = list(DataLoader(src, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(3)))
    dl = loader_for(loader, ds, method, batch_size=8, shuffle=True,
                    generator=torch.Generator().manual_seed(3))
    c = Checks()
    c.same(list(dl), ref, "epoch")
    if loader == "ThreadDataLoader":
        dl.close()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", list(SOURCES))
def test_read_rows_and_out(comm, method, kind, monkeypatch):
    count_registrations(monkeypatch)
    src = SOURCES[kind]()
    ds = make(comm, src, method)
    keys = field_keys(ds)
    c = Checks()
    rows = [N - 1, 0, 5, 5, 20]
    cols = ds.read_rows(rows)
    c.true(list(cols) == keys, f"keys {list(cols)} vs {keys}")
    c.same(cols, ref_columns(src, rows, keys), "read_rows")
    last = ds.read_rows(np.array(rows), fields=[keys[-1]])
    c.same(last, ref_columns(src, rows, keys[-1:]), "read_rows(fields=[last])")
    c.raises(KeyError, lambda: ds.read_rows(rows, fields=["nope"]), "unknown field")
    check_misses_counted(c, ds, method)

    bufs = ds.alloc(16)
    c.true(sorted(map(str, bufs)) == sorted(map(str, keys)), "alloc keys")
    misses = mr_misses(ds)
    rng = np.random.default_rng(comm.rank + 10)
    for rep in range(3):
        r = rng.integers(0, N, 16 - rep)
        got = ds.read_rows(r, out=bufs)
        c.same(got, ref_columns(src, r, keys), f"read_rows(out=) #{rep}")
        for k in keys:
            c.true(start_address(got[k]) == start_address(bufs[k]), f"column {k} is not a view of out")
        c.same(ds.__getitems__(r, out=bufs), [src[int(i)] for i in r], f"__getitems__(out=) #{rep}")
    c.true(mr_misses(ds) == misses, "reads into alloc() buffers registered memory")
    c.raises(ValueError, lambda: ds.read_rows(np.arange(17), out=bufs), "17 rows into 16", match="alloc")
    ds.release(bufs)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


def window_ref(src, rows, keys=None):
    sample = src[rows[0]]
    if keys is not None:
        return {k: stacked([src[r][k] for r in rows]) for k in keys}
    return tuple(stacked([src[r][p] for r in rows]) for p in range(len(sample)))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("loader", LOADERS)
def test_windowed_dataset(comm, loader, method):
    src = TupleSource()
    ds = make(comm, src, method)
    c = Checks()
    wd = WindowedDataset(ds, 3, stride=2, dilation=2)
    c.true(len(wd) == (N - 5) // 2 + 1, f"len {len(wd)}")
    c.same(wd[4], window_ref(src, [8, 10, 12]), "wd[4]")
    c.same(wd[-1], window_ref(src, [32, 34, 36]), "wd[-1]")
    dl = loader_for(loader, wd, method, batch_size=4)
    refs = [window_ref(src, [2 * w, 2 * w + 2, 2 * w + 4]) for w in range(len(wd))]
    ref = [default_collate(refs[b:b + 4]) for b in range(0, len(refs), 4)]
    c.same(list(dl), ref, "loader over windows")
    if loader == "ThreadDataLoader":
        dl.close()
    sel = WindowedDataset(ds, 2, starts=[0, 10, 30], fields=[0, 2])
    c.true(len(sel) == 3, "len with starts")
    got = sel.__getitems__([2, 0])
    c.same(got, [window_ref(src, [30, 31], [0, 2]), window_ref(src, [0, 1], [0, 2])], "fields=[0, 2]")
    c.raises(IndexError, lambda: WindowedDataset(ds, 2, starts=[0, N - 1]), "start too close to the end")
    c.raises(ValueError, lambda: WindowedDataset(ds, 0), "window 0")
    c.raises(IndexError, lambda: wd[len(wd)], "window past the end")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


class Slice:
    def __init__(self, src, lo, hi):
        self.src, self.lo, self.hi = src, lo, hi

    def __len__(self):
        return self.hi - self.lo

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.src[self.lo + i]


@pytest.mark.parametrize("method", METHODS)
def test_row_of_concat(comm, method):
    src = DictSource()
    concat = ConcatDataset([Slice(src, 0, 11), Slice(src, 11, 18), Slice(src, 18, 37)])
    ds = make(comm, concat, method)
    c = Checks()
    c.true(row_of(concat, 0, 3) == 3 and row_of(concat, 2, 0) == 18, "row_of")
    pairs = [(0, 3), (1, 6), (2, 0), (2, 18), (0, 0)]
    rows = [row_of(concat, s, i) for s, i in pairs]
    want = {k: stacked([concat.datasets[s][i][k] for s, i in pairs]) for k in ("x", "y")}
    c.same(ds.read_rows(rows), want, "read_rows of mapped rows")
    for s, i in ((3, 0), (1, 7), (0, -1)):
        c.raises(IndexError, lambda: row_of(concat, s, i), f"row_of({s}, {i})")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


def copy_sample(sample):
    def one(v):
        if isinstance(v, torch.Tensor):
            return v.clone()
        if isinstance(v, (np.ndarray, np.generic)):
            return v.copy()
        return copy.copy(v)
    return tuple(one(v) for v in sample)


@pytest.mark.parametrize("method", METHODS)
def test_thread_loader_reuse_buffers(comm, method, monkeypatch):
    count_registrations(monkeypatch)
    src = TupleSource()
    ds = make(comm, src, method)
    c = Checks()
    check_misses_counted(c, ds, method)
    threads = threads_for(method)
    loader = ThreadDataLoader(ds, batch_size=8, num_workers=threads, reuse_buffers=True)
    sets = loader.buffer_sets
    # One set per thread, and one per batch whose reads are in flight (prefetch).
    c.true(len(sets) == threads + loader.prefetch, f"{len(sets)} buffer sets")
    ref = list(DataLoader(src, batch_size=8))
    misses = mr_misses(ds)
    for epoch in range(2):
        c.same(list(loader), ref, f"epoch {epoch}")  # 37 = 4 x 8 + 5: the short batch too
    c.true(mr_misses(ds) == misses, "reads into the pool registered memory")
    loader.close()
    c.true(loader.buffer_sets == [], "sets kept after close()")
    if method != 0:  # method 0 ignores unknown buffers, as DDStore does
        c.raises(ValueError, lambda: ds.release(sets[0]), "releasing a set again")
    c.raises(RuntimeError, lambda: iter(loader), "a new epoch after close()")
    c.raises(ValueError, lambda: ThreadDataLoader(ds, batch_size=None, reuse_buffers=True),
             "batch_size=None")
    c.raises(ValueError, lambda: ThreadDataLoader(ds, batch_size=8, reuse_buffers=True,
                                                  collate_fn=lambda b: b), "undeclared collate")
    c.raises(TypeError, lambda: ThreadDataLoader(src, batch_size=8, reuse_buffers=True),
             "dataset without alloc()")
    copying = ThreadDataLoader(ds, batch_size=8, num_workers=threads, reuse_buffers=True,
                               collate_fn=lambda b: [copy_sample(s) for s in b], collate_copies=True)
    got = [s for batch in copying for s in batch]
    c.same(got, [src[i] for i in range(N)], "copying collate")
    copying.close()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
def test_encode_decode(comm, method):
    c = Checks()
    c.raises(TypeError, lambda: make(comm, Labeled(), method), "strings and objects without encode")
    ds = make(comm, Labeled(), method, encode=encode_labeled, decode=decode_labeled)
    c.same(ds[7], expected_labeled(7), "ds[7]")
    c.same(ds[N - 1], expected_labeled(N - 1), "ds[N-1]")
    c.same(ds.__getitems__([3, 0, N - 1]), [expected_labeled(i) for i in (3, 0, N - 1)], "__getitems__")
    loader = ThreadDataLoader(ds, batch_size=5, num_workers=threads_for(method), collate_fn=lambda b: b)
    c.same([s for b in loader for s in b], [expected_labeled(i) for i in range(N)], "loader")
    loader.close()
    rows = ds.read_rows([4, 5])
    c.true(list(rows) == ["group", "label", "x"], f"stored keys {list(rows)}")
    c.same(rows["label"], np.array([1, 2], np.int64), "stored label ids")
    c.same(rows["x"], torch.stack([torch.full((2,), 4.0), torch.full((2,), 5.0)]), "stored x")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
def test_fields_selection(comm, method):
    c = Checks()
    dsrc, tsrc = DictSource(), TupleSource()
    ds = make(comm, dsrc, method, fields=["y"])
    c.same(ds[3], {"y": dsrc[3]["y"]}, "fields=['y']")
    c.true(ds.variables == [f"t{method}/y"], f"variables {ds.variables}")
    ts = make(comm, tsrc, method, name="tf", fields=[2, 0])
    c.same(ts.__getitems__([5, 36]), [(tsrc[i][2], tsrc[i][0]) for i in (5, 36)], "fields=[2, 0]")
    c.raises(ValueError, lambda: make(comm, dsrc, method, fields=["y"], encode=lambda s: s),
             "fields and encode", match="not both")
    c.raises(ValueError, lambda: make(comm, dsrc, method, fields=["nope"]), "missing key", match="nope")
    c.raises(ValueError, lambda: make(comm, tsrc, method, fields=[7]), "missing position")
    c.raises(ValueError, lambda: make(comm, SOURCES["single"](), method, fields=[0]), "single samples",
             match="dict, tuple or list")
    teardown(comm, ts)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
def test_per_sample_fallback(comm, method, monkeypatch):
    """__getitems__ makes one get_batch per field; with DDSTORE_BATCH_GET=0
    (read at construction) one get per sample and field instead."""
    src = DictSource()
    c = Checks()
    idx = [(comm.rank * 7 + k * 5) % N for k in range(9)]
    batched = make(comm, src, method, name="b")
    calls = [batched.ddstore.get_profile(v)["calls"] for v in batched.variables]
    c.same(batched.__getitems__(idx), [src[i] for i in idx], "batched __getitems__")
    after = [batched.ddstore.get_profile(v)["calls"] for v in batched.variables]
    c.true([a - b for a, b in zip(after, calls)] == [1, 1], f"batched: calls {calls} -> {after}")
    teardown(comm, batched)
    monkeypatch.setenv("DDSTORE_BATCH_GET", "0")
    ds = make(comm, src, method)
    calls = [ds.ddstore.get_profile(v)["calls"] for v in ds.variables]
    c.same(ds.__getitems__(idx), [src[i] for i in idx], "per-sample __getitems__")
    after = [ds.ddstore.get_profile(v)["calls"] for v in ds.variables]
    c.true([a - b for a, b in zip(after, calls)] == [len(idx)] * 2, f"calls {calls} -> {after}")
    bufs = ds.alloc(len(idx))  # out= still reads batches
    c.same(ds.__getitems__(idx, out=bufs), [src[i] for i in idx], "__getitems__(out=)")
    ds.release(bufs)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("var, raw", [("DDSTORE_METHOD", "3"), ("DDSTORE_METHOD", "one"),
                                      ("DDSTORE_BATCH_GET", "2"), ("DDSTORE_BATCH_GET", "maybe")])
def test_bad_environment_is_refused_naming_the_variable(comm, monkeypatch, var, raw):
    """The torch layer's variables follow the library's rules: a value
    outside them fails the construction (before any store exists, on every
    rank) with InvalidArgumentError naming the variable and the value."""
    import pyddstore
    monkeypatch.setenv(var, raw)
    c = Checks()
    # No method= argument, so DDSTORE_METHOD is read (a valid one when the
    # bad variable is DDSTORE_BATCH_GET).
    if var != "DDSTORE_METHOD":
        monkeypatch.setenv("DDSTORE_METHOD", "0")
    err = c.raises(pyddstore.InvalidArgumentError, lambda: DistDataset(TupleSource(), "badenv", comm=comm),
                   f"{var}={raw}", match=var)
    c.true(err is None or raw in str(err), f"the message names the value {raw!r}: {err}")
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
def test_ddstore_width_groups(comm, method):
    """Groups of `width` consecutive ranks each hold a full copy: width 2 on
    4 ranks, width 1 (every rank alone) on fewer."""
    width = 2 if comm.size >= 4 else 1
    src = TupleSource()
    c = Checks()
    if method == 2 and width != comm.size:
        c.raises(NotImplementedError, lambda: make(comm, src, method, ddstore_width=width), "method 2")
        assert agree(comm, c.ok), c.errors
        return
    ds = make(comm, src, method, ddstore_width=width)
    c.true(ds.ddstore_comm.size == min(width, comm.size), f"group of {ds.ddstore_comm.size}")
    c.true(ds.ddstore.info(ds.variables[0])[0] == N, "each group holds every sample")
    c.same(ds.__getitems__(range(N)), [src[i] for i in range(N)], "every sample")
    c.same(ds[N - 1 - comm.rank], src[N - 1 - comm.rank], "ds[i]")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


class Broken:
    """{"x": float32 array of 3, "y": int}, with bad samples where `where` says."""

    VALUES = {
        "shape": lambda i: np.zeros(4 if i == N - 1 else 3 + i % 2, np.float32),
        "dtype": lambda i: np.zeros(3, np.float16),
        "nested": lambda i: [np.zeros(3, np.float32)],
        "object": lambda i: object(),
    }

    def __init__(self, case, where):
        self.case, self.where = case, where

    def __len__(self):
        return N

    def __getitem__(self, i):
        bad = self.where == "all" or i == N - 1
        x = self.VALUES[self.case](i) if bad else np.zeros(3, np.float32)
        return {"x": x, "y": i}


@pytest.mark.parametrize("chunk", [None, 3])
@pytest.mark.parametrize("where", ["last", "all"])
@pytest.mark.parametrize("case,exc", [("shape", ValueError), ("dtype", TypeError),
                                      ("nested", TypeError), ("object", TypeError)])
def test_unsupported_samples_raise(comm, case, exc, where, chunk):
    """The last sample is on the last rank only, and not its first: every
    rank raises all the same."""
    c = Checks()
    # "all" fails on the first sample, before any store exists: one method is enough.
    for method in METHODS if where == "last" else METHODS[:1]:
        c.raises(exc, lambda: make(comm, Broken(case, where), method, chunk_size=chunk), f"method {method}")
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("method", METHODS)
def test_chunk_size_needs_host_storage(comm, method):
    c = Checks()
    c.raises(ValueError, lambda: make(comm, DictSource(), method, chunk_size=4, add_device="cuda"),
             "chunk_size with add_device", match="host")
    c.raises(ValueError, lambda: make(comm, DictSource(), method, chunk_size=0), "chunk_size=0")
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("chunk", [None, 4])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", RecordSource.KINDS)
def test_record_items(comm, kind, method, chunk):
    src = RecordSource(kind)
    ds = make(comm, src, method, chunk_size=chunk)
    c = Checks()
    for i in (0, 17, N - 1):
        c.same(ds[i], src[i], f"ds[{i}]")
    c.same(ds.__getitems__([5, 0, N - 1, 5]), [src[i] for i in (5, 0, N - 1, 5)], "__getitems__")
    loader = ThreadDataLoader(ds, batch_size=6, num_workers=1, collate_fn=lambda b: b)
    c.same([s for b in loader for s in b], [src[i] for i in range(N)], "loader")
    loader.close()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


def test_record_dtypes_property(comm):
    ds = make(comm, RecordSource("dict"), METHODS[0])
    c = Checks()
    c.true(ds.dtypes["rec"] == REC and isinstance(ds.dtypes["rec"], np.dtype), f"{ds.dtypes}")
    c.true(ds.dtypes["t"] == "float32", f"{ds.dtypes}")
    c.true(ds.shapes["rec"] == () and ds.shapes["t"] == (2,), f"{ds.shapes}")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


# -- beyond DDStore's tests ---------------------------------------------------

def test_import_loads_torch_not_mpi(comm):
    """`import pyddstore.torch` imports torch and neither mpi4py nor the store
    (torch must come before MPI); checked in a fresh interpreter."""
    import subprocess
    import sys
    ok = True
    if comm.rank == 0:
        code = ("import sys, pyddstore.torch as t; "
                "assert 'torch' in sys.modules, 'torch'; "
                "assert 'mpi4py' not in sys.modules and 'mpi4py.MPI' not in sys.modules, 'mpi4py'; "
                "assert 'pyddstore._core' not in sys.modules and 'pyddstore._lib' not in sys.modules, 'store'; "
                "assert sorted(t.__all__) == ['DistDataset', 'DistDatasetReader', 'RaggedDataset', "
                "'ResumableBatchSampler', 'ThreadDataLoader', 'WindowedDataset', 'global_order', 'row_of'], "
                "sorted(t.__all__)")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "MPI", "HYDRA"))}
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        ok = res.returncode == 0
        if not ok:
            print(res.stderr)
    assert agree(comm, ok)


@pytest.mark.parametrize("method", METHODS)
def test_device_cpu(comm, method):
    """device="cpu" and add_device="cpu": host storage and host buffers;
    tensors come back as CPU tensors."""
    src = TupleSource()
    ds = make(comm, src, method, device="cpu", add_device="cpu")
    c = Checks()
    c.same(ds[3], src[3], "ds[3]")
    c.same(ds.__getitems__([36, 0]), [src[36], src[0]], "__getitems__")
    bufs = ds.alloc(4)
    c.true(all(isinstance(b, np.ndarray) for b in bufs.values()), "alloc() gives host arrays")
    c.same(ds.read_rows([1, 2], out=bufs)[0], torch.stack([src[1][0], src[2][0]]), "read_rows(out=)")
    ds.release(bufs)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


class Lazy:
    """Samples made on demand: 2 KiB of float32 each."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full(512, i, np.float32), "y": i}


@pytest.mark.parametrize("method", METHODS)
def test_chunked_loading_memory(comm, method):
    """chunk_size: Python-side peak of one chunk (the share lives in the
    store's memory), against about the share without it."""
    import tracemalloc
    n = 400 * comm.size  # 400 samples, 800 KiB, per rank
    share = 400 * 512 * 4
    peaks = {}
    c = Checks()
    for chunk in (None, 20):
        comm.Barrier()
        tracemalloc.start()
        ds = make(comm, Lazy(n), method, chunk_size=chunk)
        peaks[chunk] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        i = (comm.rank * 401) % n
        c.same(ds[i], Lazy(n)[i], f"chunk {chunk}: ds[{i}]")
        teardown(comm, ds)
    c.true(peaks[None] > share, f"whole share: peak {peaks[None]} <= share {share}")
    c.true(peaks[20] < share / 4, f"chunked: peak {peaks[20]} not well below the share {share}")
    assert agree(comm, c.ok), (c.errors, peaks)


def test_method0_local_errors_fail_every_rank(comm):
    """A rank whose batched read fails before reaching the store (bad out=,
    unknown field, bad window) takes part in the collective with an invalid
    request: the others' read fails too, instead of waiting forever. (The
    collective batch mode: DistDataset's default is one-sided, where each
    rank's errors are its own.)"""
    src = DictSource()
    ds = make(comm, src, 0, batch_mode="collective")
    wd = WindowedDataset(ds, 2)
    c = Checks()
    bufs = ds.alloc(4)
    bad = comm.rank == comm.size - 1
    cases = [
        ("out=", lambda: ds.read_rows(range(5 if bad else 4), out=bufs), ValueError),
        ("fields", lambda: ds.read_rows([0, 1], fields=["nope" if bad else "x"]), KeyError),
        ("__getitems__(out=)", lambda: ds.__getitems__(range(5 if bad else 3), out=bufs), ValueError),
        ("window", lambda: wd.__getitems__([len(wd) if bad else 0]), IndexError),
    ]
    for what, fn, exc in cases:
        c.raises(exc if bad else Exception, fn, what)
    c.same(ds.read_rows([0, N - 1], fields=["y"]), {"y": torch.tensor([0, 11 * (N - 1)])}, "usable after")
    ds.release(bufs)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors
