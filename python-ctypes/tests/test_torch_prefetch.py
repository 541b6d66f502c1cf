"""pyddstore.torch prefetch (issue 20): ThreadDataLoader keeps the reads of
the next k batches in flight (non-blocking batched reads). Over methods 0
(one-sided and collective batch modes), 1 and 2, every batch of every epoch
is compared with prefetch=0 and with the source: shuffled and distributed
samplers with set_epoch, a break out of the loop followed by a new epoch,
reuse_buffers, WindowedDataset, and errors at start arriving at their turn.
"""

import gc
import itertools

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from helpers import agree
from pyddstore.torch import DistDataset, ThreadDataLoader, WindowedDataset
from torch_helpers import METHODS, Checks, DictSource, TupleSource, ds_kwargs, teardown, threads_for

KINDS = [(m, mode) for m in METHODS for mode in (["onesided", "collective"] if m == 0 else [None])]
_count = itertools.count()


def make(comm, src, kind, **kw):
    method, mode = kind
    if mode:
        kw["batch_mode"] = mode
    return DistDataset(src, f"pf{next(_count)}", comm=comm, **ds_kwargs(method, **kw))


def threads(kind):
    return threads_for(kind[0]) if kind[1] != "collective" else 1


def epochs(loader, n, sampler=None):
    out = []
    for e in range(n):
        if sampler is not None:
            sampler.set_epoch(e)
        out.append(list(loader))
    return out


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"m{k[0]}-{k[1] or 'onesided'}")
def test_prefetch_matches_no_prefetch(comm, kind):
    src = TupleSource()
    ds = make(comm, src, kind)
    c = Checks()
    sampler = DistributedSampler(ds, num_replicas=comm.size, rank=comm.rank, shuffle=True, seed=3)
    runs = {}
    for k in (0, 1, 2, 5):
        loader = ThreadDataLoader(ds, batch_size=4, sampler=sampler, num_workers=threads(kind), prefetch=k)
        c.true(loader.prefetch == k, f"prefetch {loader.prefetch}")
        runs[k] = epochs(loader, 2, sampler)
        loader.close()
    ref = []
    for e in range(2):
        sampler.set_epoch(e)
        ref.append(list(DataLoader(src, batch_size=4, sampler=list(sampler))))
    for k, got in runs.items():
        c.same(got, ref, f"prefetch={k} vs the source")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"m{k[0]}-{k[1] or 'onesided'}")
def test_reads_ahead_and_break(comm, kind):
    """k batches' reads are in flight while one is used; a break drains them."""
    src = DictSource()
    ds = make(comm, src, kind)
    c = Checks()
    c.true(ds.prefetch == 2, f"dataset default prefetch {ds.prefetch}")
    loader = ThreadDataLoader(ds, batch_size=3, num_workers=threads(kind))  # the dataset's prefetch: 2
    ref = list(DataLoader(src, batch_size=3))
    it = iter(loader)
    first = next(it)
    c.same(first, ref[0], "first batch")
    c.true(it._reads_ahead and len(it._pending) == 2, f"{len(it._pending)} batches ahead")
    for n, batch in enumerate(loader):  # a second iterator, broken out of
        c.same(batch, ref[n], f"batch {n} of the broken epoch")
        if n == 2:
            break
    del batch
    gc.collect()  # the broken iterator is gone: its reads were drained
    c.same([first] + list(it), ref, "the first iterator, interleaved")
    c.same(list(loader), ref, "a whole epoch after the break")
    loader.close()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"m{k[0]}-{k[1] or 'onesided'}")
def test_prefetch_reuse_buffers_and_windows(comm, kind):
    src = TupleSource()
    ds = make(comm, src, kind)
    c = Checks()
    ref = list(DataLoader(src, batch_size=8))
    loader = ThreadDataLoader(ds, batch_size=8, num_workers=threads(kind), reuse_buffers=True, prefetch=3)
    c.true(len(loader.buffer_sets) == threads(kind) + 3, f"{len(loader.buffer_sets)} sets")
    for e in range(2):
        c.same(list(loader), ref, f"reuse_buffers epoch {e}")
    it = iter(loader)
    next(it)
    loader.close()  # drains the reads in flight before releasing the sets
    c.true(loader.buffer_sets == [], "sets kept after close()")
    win = WindowedDataset(ds, window=3, stride=2, fields=[0, 6])
    c.true(win.prefetch == ds.prefetch, "windows take the dataset's prefetch")
    got = {k: list(ThreadDataLoader(win, batch_size=5, num_workers=threads(kind), prefetch=k)) for k in (0, 2)}
    c.same(got[2], got[0], "windows: prefetch=2 vs 0")
    w0 = got[0][0]
    c.true(torch.equal(w0[0][1], torch.stack([src[2 + r][0] for r in range(3)])), "window 1 rows")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"m{k[0]}-{k[1] or 'onesided'}")
def test_error_at_start_comes_at_its_turn(comm, kind):
    """A batch whose start fails raises when its turn comes (as without prefetch)."""
    src = DictSource()
    ds = make(comm, src, kind)
    c = Checks()
    n = len(ds)
    batches = [[0, 1], [2, 3], [n, 0], [4, 5]]  # the third names a row past the end
    loader = ThreadDataLoader(ds, batch_sampler=batches, num_workers=threads(kind), prefetch=3)
    it = iter(loader)
    got = [next(it), next(it)]
    c.same(got, list(DataLoader(src, batch_sampler=batches[:2])), "first batches")
    c.raises(IndexError, lambda: next(it), "the bad batch", match="out of range")
    it.close()
    c.same(list(ThreadDataLoader(ds, batch_size=4, prefetch=2, num_workers=threads(kind))),
           list(DataLoader(src, batch_size=4)), "usable after")
    with pytest.raises(ValueError, match="prefetch"):
        ThreadDataLoader(ds, batch_size=4, prefetch=-1)
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors
