"""ThreadDataLoader on plain in-memory datasets (no store): iterators,
prefetch bound, random draws, thread pinning, close() and errors.
Every rank runs these on its own."""

import itertools
import os
import threading
import time

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from helpers import RankChecks, agree
from pyddstore.torch import ThreadDataLoader
from torch_helpers import Checks, TupleSource


class Counting:
    """range(n) that records the batches fetched, and where."""

    def __init__(self, n=40, meet=0):
        self.n = n
        self.fetched = []
        self.where = []
        self.lock = threading.Lock()
        # The first `meet` fetches wait for each other: that many threads work.
        self.meet = threading.Barrier(meet, timeout=30) if meet else None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i

    def __getitems__(self, indices):
        with self.lock:
            self.fetched.append(list(indices))
            self.where.append((threading.get_ident(), frozenset(os.sched_getaffinity(0))))
            first = len(self.fetched) <= (self.meet.parties if self.meet else 0)
        if first:
            self.meet.wait()
        return list(indices)


def settled(count, want, timeout=20.0):
    """count() once it reached `want` (waiting up to `timeout` s) and stayed
    there for another 0.3 s: a busy machine may be slow to start a fetch."""
    t0 = time.monotonic()
    while count() < want and time.monotonic() - t0 < timeout:
        time.sleep(0.01)
    time.sleep(0.3)
    return count()


def test_thread_loader_iterators(comm):
    data = list(range(20))
    ref = list(DataLoader(data, batch_size=3))
    loader = ThreadDataLoader(data, batch_size=3, num_workers=2)
    c = Checks()
    it = iter(loader)
    c.true(iter(it) is it, "iter(it) is it")
    c.true(len(it) == len(loader) == 7, f"len {len(it)}")
    got = [next(it)] + list(itertools.islice(it, 2)) + list(it)
    c.same(got, ref, "next, islice, list: one epoch")
    c.true(list(it) == [], "an ended epoch yields nothing more")
    c.raises(StopIteration, lambda: next(it), "next after the end")
    a, b = iter(loader), iter(loader)
    got_a, got_b = [], []
    for x, y in zip(a, b):
        got_a.append(x)
        got_b.append(y)
    c.same(got_a, ref, "interleaved iterator a")
    c.same(got_b, ref, "interleaved iterator b")
    early = iter(loader)
    next(early)
    early.close()
    c.raises(StopIteration, lambda: next(early), "next after close()")
    c.same(list(loader), ref, "the epoch after an early stop")
    # batch_size=None: the sampler's indices as they are, default_convert.
    plain = ThreadDataLoader(data, batch_size=None)
    c.same(list(plain), list(DataLoader(data, batch_size=None)), "no batching")
    plain.close()
    loader.close()
    assert agree(comm, c.ok), c.errors


def test_thread_loader_keeps_prefetch_full(comm):
    ds = Counting()
    loader = ThreadDataLoader(ds, batch_size=2, num_workers=2, prefetch_factor=1, collate_fn=lambda b: b)
    c = Checks()
    it = iter(loader)
    held = next(it)
    c.true(held == [0, 1], f"first batch {held}")
    n = settled(lambda: len(ds.fetched), 1 + 2)
    c.true(n == 1 + 2, f"{n} batches fetched while one is held")
    next(it)
    n = settled(lambda: len(ds.fetched), 2 + 2)
    c.true(n == 2 + 2, f"{n} batches fetched after the second")
    it.close()
    loader.close()
    assert agree(comm, c.ok), c.errors


def test_thread_loader_default_prefetch(comm):
    """Without prefetch_factor: 2 per thread, as DataLoader."""
    ds = Counting()
    loader = ThreadDataLoader(ds, batch_size=2, num_workers=3, collate_fn=lambda b: b)
    it = iter(loader)
    ck = RankChecks(comm)
    ck(settled(lambda: len(ds.fetched), 6) == 6, 'settled(lambda: len(ds.fetched), 6) == 6')
    it.close()
    loader.close()
    ck.done(len(ds.fetched))


def test_thread_loader_random_draws_match_dataloader(comm):
    """Same batches and the same random numbers afterwards as DataLoader:
    each epoch draws one int64 from the generator for the workers' seed."""
    src = TupleSource()
    c = Checks()
    for gen in (None, "generator"):
        runs = []
        for cls in (DataLoader, ThreadDataLoader):
            torch.manual_seed(11)
            g = torch.Generator().manual_seed(5) if gen else None
            loader = cls(src, batch_size=8, shuffle=True, generator=g, **({"num_workers": 2} if cls is ThreadDataLoader else {}))
            epochs = []
            for _ in range(2):
                epochs.append(list(loader))
                epochs.append(torch.rand(3))  # the training loop's draws (dropout, ...)
            epochs.append(g.initial_seed() if g is not None else None)
            if g is not None:
                epochs.append(torch.randint(0, 1 << 30, (2,), generator=g))
            runs.append(epochs)
            if cls is ThreadDataLoader:
                loader.close()
        c.same(runs[1], runs[0], f"generator={gen}")
    assert agree(comm, c.ok), c.errors


def test_thread_loader_results_in_order_and_errors(comm):
    class Slow:
        def __len__(self):
            return 12

        def __getitem__(self, i):
            time.sleep(0.03 if i % 3 == 0 else 0.0)  # later batches finish first
            if i == 10:
                raise KeyError("sample 10 is broken")
            return i

    c = Checks()
    loader = ThreadDataLoader(Slow(), batch_size=1, num_workers=3)
    it = iter(loader)
    got = [int(next(it)) for _ in range(10)]
    c.true(got == list(range(10)), f"order {got}")
    c.raises(KeyError, lambda: next(it), "the worker's exception", match="broken")
    c.true(int(next(it)) == 11, "the epoch goes on after an error")
    c.raises(StopIteration, lambda: next(it), "end")
    loader.close()
    assert agree(comm, c.ok), c.errors


def test_thread_loader_close_and_arguments(comm):
    c = Checks()
    loader = ThreadDataLoader(list(range(8)), batch_size=4)
    c.same(list(loader), [torch.arange(4), torch.arange(4, 8)], "num_workers=0 uses one thread")
    loader.close()
    loader.close()  # idempotent
    c.raises(RuntimeError, lambda: iter(loader), "iter after close()", match="closed")

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    c.raises(TypeError, lambda: ThreadDataLoader(Stream()), "IterableDataset")
    # DataLoader's own checks.
    c.raises(ValueError, lambda: ThreadDataLoader([1, 2], prefetch_factor=2), "prefetch_factor without workers")
    c.raises(ValueError, lambda: ThreadDataLoader([1, 2], batch_size=None, drop_last=True), "drop_last")
    # No worker processes: worker_init_fn is never called, get_worker_info() is None.
    seen = []

    class Info:
        def __len__(self):
            return 4

        def __getitem__(self, i):
            seen.append(torch.utils.data.get_worker_info())
            return i

    calls = []
    loader = ThreadDataLoader(Info(), batch_size=2, num_workers=2, worker_init_fn=calls.append,
                              persistent_workers=True, timeout=5)
    c.same(list(loader), [torch.tensor([0, 1]), torch.tensor([2, 3])], "with inert arguments")
    c.true(calls == [] and seen == [None] * 4, f"worker_init_fn {calls}, worker info {seen}")
    loader.close()
    # pin_memory without an accelerator: no pinning, same batches.
    loader = ThreadDataLoader(list(range(6)), batch_size=3, pin_memory=True)
    c.same(list(loader), [torch.arange(3), torch.arange(3, 6)], "pin_memory=True")
    loader.close()
    assert agree(comm, c.ok), c.errors


def test_thread_loader_affinity(comm, monkeypatch):
    """DDSTORE_AFFINITY_WIDTH/OFFSET: thread k keeps entries
    [offset + k*width, offset + (k+1)*width) of the process's CPU list."""
    cpus = sorted(os.sched_getaffinity(0))
    monkeypatch.setenv("DDSTORE_AFFINITY_WIDTH", "1")
    monkeypatch.setenv("DDSTORE_AFFINITY_OFFSET", str(len(cpus) - 1))
    ds = Counting(8, meet=2)
    loader = ThreadDataLoader(ds, batch_size=1, num_workers=2, collate_fn=lambda b: b)
    list(loader)
    loader.close()
    # Thread 0 (first started) gets the last CPU; thread 1's slice is past
    # the end of the list: it stays unpinned.
    masks = {}
    for tid, mask in ds.where:
        masks.setdefault(tid, set()).add(mask)
    pinned, full = frozenset(cpus[-1:]), frozenset(cpus)
    seen = set().union(*masks.values())
    ck = RankChecks(comm)
    ck(all(len(m) == 1 for m in masks.values()), f"a thread's mask changed: {masks}")
    ck(len(masks) == 2 and seen == {pinned, full}, 'len(masks) == 2 and seen == {pinned, full}')
    ck(os.sched_getaffinity(0) == set(cpus), "the calling thread's affinity changed")
    ck.done((cpus, masks))


@pytest.mark.parametrize("var, raw", [("DDSTORE_AFFINITY_WIDTH", "two"), ("DDSTORE_AFFINITY_WIDTH", "-1"),
                                      ("DDSTORE_AFFINITY_OFFSET", "1.5"), ("DDSTORE_AFFINITY_OFFSET", "-2")])
def test_thread_loader_affinity_bad_values(monkeypatch, var, raw):
    """A bad pinning variable fails the loader's construction naming it (a
    bare int() used to raise a ValueError that named nothing, or took a
    negative width as "off")."""
    import pyddstore
    monkeypatch.setenv("DDSTORE_AFFINITY_WIDTH", "1")
    monkeypatch.setenv(var, raw)
    with pytest.raises(pyddstore.InvalidArgumentError, match=var):
        ThreadDataLoader(list(range(4)), batch_size=1, num_workers=2)


def test_thread_loader_affinity_off_by_default(comm, monkeypatch):
    monkeypatch.delenv("DDSTORE_AFFINITY_WIDTH", raising=False)
    cpus = frozenset(os.sched_getaffinity(0))
    ds = Counting(6, meet=2)
    loader = ThreadDataLoader(ds, batch_size=1, num_workers=2, collate_fn=lambda b: b)
    list(loader)
    loader.close()
    ck = RankChecks(comm)
    ck(len({tid for tid, _ in ds.where}) == 2 and all(mask == cpus for _, mask in ds.where), 'len({tid for tid, _ in ds.where}) == 2 and all(mask == cpus for _, mask in ds.where)')
    ck.done()


@pytest.mark.parametrize("workers", [0, 2])
def test_thread_loader_samplers(comm, workers):
    """A batch_sampler, a sampler yielding whole batches with batch_size=None, drop_last."""
    data = np.arange(10, dtype=np.float32)
    c = Checks()
    kw = {"num_workers": workers}
    bs = [[3, 1], [0, 9, 2], [5]]
    got = list(ThreadDataLoader(data, batch_sampler=bs, **kw))
    c.same(got, list(DataLoader(data, batch_sampler=bs)), "batch_sampler")
    got = list(ThreadDataLoader(data, sampler=bs, batch_size=None, **kw))
    c.same(got, list(DataLoader(data, sampler=bs, batch_size=None)), "batches from the sampler")
    got = list(ThreadDataLoader(data, batch_size=4, drop_last=True, **kw))
    c.same(got, list(DataLoader(data, batch_size=4, drop_last=True)), "drop_last")
    assert agree(comm, c.ok), c.errors


def test_thread_loader_threads_over_method_0(comm):
    """Method 0 in the one-sided batch mode (DistDataset's default) serves
    several loader threads: every batch is read and matches a plain
    DataLoader's, on ranks that read different numbers of batches. In the
    collective mode several threads would call the collective concurrently:
    refused up front."""
    import pyddstore
    from helpers import METHODS
    from pyddstore.torch import DistDataset
    if 0 not in METHODS:
        pytest.skip("the library does not serve method 0")
    c = Checks()
    ds = DistDataset(TupleSource(), "loader-m0", comm=comm, method=0)
    c.true(ds.ddstore.batch_mode == "onesided", f"batch mode {ds.ddstore.batch_mode}")
    # Rank r reads only the first len - r samples: different batch counts.
    part = list(range(len(ds) - comm.Get_rank()))
    loader = ThreadDataLoader(ds, batch_size=4, num_workers=4, sampler=part)
    c.same(list(loader), list(DataLoader(ds, batch_size=4, sampler=part)), "4 threads over method 0")
    loader.close()
    prof = ds.ddstore.get_profile(ds._fields[0].var)
    c.true(prof["req_bytes_sent"] == 0 and prof["req_bytes_recv"] == 0, f"one-sided request bytes {prof}")
    comm.Barrier()
    ds.ddstore.free()

    ds = DistDataset(TupleSource(), "loader-m0c", comm=comm, method=0, batch_mode="collective")
    c.true(ds.ddstore.batch_mode == "collective", f"batch mode {ds.ddstore.batch_mode}")
    e = c.raises(pyddstore.InvalidArgumentError, lambda: ThreadDataLoader(ds, batch_size=4, num_workers=2),
                 "num_workers=2 over method 0, collective", match="num_workers=2")
    c.true(e is not None and "collective" in str(e), f"message {e} does not name the collective mode")
    one = ThreadDataLoader(ds, batch_size=4, num_workers=1)  # one thread is fine, and reads
    c.true(len(list(one)) == (len(ds) + 3) // 4, "batches with one thread")
    one.close()
    comm.Barrier()
    ds.ddstore.free()

    # The auto mode's batches are called as collective ones: refused alike.
    ds = DistDataset(TupleSource(), "loader-m0a", comm=comm, method=0, batch_mode="auto")
    c.true(ds.ddstore.batch_mode == "auto", f"batch mode {ds.ddstore.batch_mode}")
    c.raises(pyddstore.InvalidArgumentError, lambda: ThreadDataLoader(ds, batch_size=4, num_workers=2),
             "num_workers=2 over method 0, auto", match="num_workers=2")
    one = ThreadDataLoader(ds, batch_size=4, num_workers=1)
    c.same(list(one), list(DataLoader(ds, batch_size=4)), "batches with one thread, auto mode")
    one.close()
    comm.Barrier()
    ds.ddstore.free()
    assert agree(comm, c.ok), c.errors


# ThreadDataLoader with the default collate takes each field's batch straight
# from the read buffer (DistDataset._getitems_collated): generated schemas
# check that it is default_collate's batch exactly (types, dtypes, shapes,
# values, dict/list/single), with and without prefetch and reused buffers.

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from helpers import METHODS  # noqa: E402
from mpi4py import MPI  # noqa: E402
from torch_helpers import N, ds_kwargs, teardown  # noqa: E402

_DTYPES = ("bool", "uint8", "int32", "int64", "float32", "float64")
_PY = {"bool": bool, "int64": int, "float64": float}


@st.composite
def _schemas(draw):
    structure = draw(st.sampled_from(["single", "dict", "tuple", "list"]))
    nfields = 1 if structure == "single" else draw(st.integers(1, 3))
    fields = []
    for _ in range(nfields):
        kind = draw(st.sampled_from(["torch", "numpy", "npscalar", "py"]))
        dtype = draw(st.sampled_from(sorted(_PY) if kind == "py" else _DTYPES))
        shape = () if kind in ("npscalar", "py") else tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        fields.append((kind, dtype, shape))
    return structure, fields


class _Generated:
    """Sample i of a generated schema: every value a function of (i, field)."""

    def __init__(self, schema):
        self.structure, self.fields = schema

    def __len__(self):
        return N

    def _value(self, i, j, kind, dtype, shape):
        n = int(np.prod(shape)) if shape else 1
        v = np.arange(n, dtype=np.int64) * 3 + i * 7 + j
        v = (v % 2 == 0) if dtype == "bool" else (v % 256 if dtype == "uint8" else v)
        v = v.astype(dtype).reshape(shape)
        if dtype.startswith("float"):
            v = v / 4  # not whole numbers
        if kind == "torch":
            return torch.from_numpy(np.ascontiguousarray(v))
        if kind == "numpy":
            return v
        if kind == "npscalar":
            return v.reshape(())[()]
        return _PY[dtype](v.reshape(()).item())

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(i)
        vals = [self._value(i, j, *f) for j, f in enumerate(self.fields)]
        if self.structure == "single":
            return vals[0]
        if self.structure == "dict":
            return {f"f{j}": v for j, v in enumerate(vals)}
        return tuple(vals) if self.structure == "tuple" else vals


# Methods 0 and 1 where the library serves them; never none (method 0 needs
# only MPI): a library without either fails these tests instead of skipping.
_LOADER_METHODS = [m for m in (0, 1) if m in METHODS] or [0]
# Each example builds a store: 4 ranks on 2 cores take several times longer,
# so they run the first 10 of the same derandomized examples.
_EXAMPLES = 24 if MPI.COMM_WORLD.size <= 2 else 10


@settings(max_examples=_EXAMPLES, derandomize=True, database=None, deadline=None, print_blob=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=_schemas(), method=st.sampled_from(_LOADER_METHODS), batch=st.integers(1, 7),
       prefetch=st.integers(0, 2), reuse=st.booleans())
def test_thread_loader_collates_from_the_read_buffers(comm, schema, method, batch, prefetch, reuse):
    from pyddstore.torch import DistDataset
    c = Checks()
    ds = DistDataset(_Generated(schema), "collated", comm=comm, **ds_kwargs(method))
    try:
        c.true(ds._collates(), f"{schema}: not collated from the read buffers")
        src = _Generated(schema)
        for i in (0, N - 1):  # one sample (a single host field takes get's lean path)
            c.same(ds[i], src[i], f"{schema}: ds[{i}]")
        part = list(range(comm.Get_rank(), N, 2))[::-1]
        want = list(DataLoader(ds, batch_size=batch, sampler=part))
        # From here on, a sample-by-sample path would fail the test.
        ds._samples = None
        loader = ThreadDataLoader(ds, batch_size=batch, sampler=part, prefetch=prefetch, reuse_buffers=reuse)
        got = [b for b in loader]  # every batch kept: reused buffers must not show through
        loader.close()
        c.same(got, want, f"{schema} method {method} batch {batch} prefetch {prefetch} reuse {reuse}")
    finally:
        teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


def test_thread_loader_collates_per_sample_where_it_must(comm):
    """A decode, a custom collate_fn or DDSTORE_BATCH_GET=0 keep the
    per-sample path: the batch is collate_fn(samples)."""
    from pyddstore.torch import DistDataset
    from torch.utils.data import default_collate
    method = _LOADER_METHODS[0]
    c = Checks()
    ds = DistDataset(_Generated(("dict", [("torch", "float32", (2,)), ("py", "int64", ())])), "percoll",
                     comm=comm, **ds_kwargs(method))
    try:
        seen = []

        def counting(samples):
            seen.append(len(samples))
            return default_collate(samples)

        part = list(range(comm.Get_rank(), N, 2))
        got = list(ThreadDataLoader(ds, batch_size=4, sampler=part, collate_fn=counting))
        c.same(got, list(DataLoader(ds, batch_size=4, sampler=part)), "custom collate_fn")
        c.true(sum(seen) == len(part), f"custom collate_fn saw {sum(seen)} samples of {len(part)}")
        ds.decode = lambda sample, i: {"x": sample["f0"] * 2}
        c.true(not ds._collates(), "decode: collated from the read buffers")
        got = list(ThreadDataLoader(ds, batch_size=4, sampler=part))
        c.same(got, list(DataLoader(ds, batch_size=4, sampler=part)), "decode")
        ds.decode = None
        ds._batched = False  # what DDSTORE_BATCH_GET=0 sets
        c.true(not ds._collates(), "DDSTORE_BATCH_GET=0: collated from the read buffers")
    finally:
        teardown(comm, ds)
    assert agree(comm, c.ok), c.errors
