"""Resumable loading (issue 38): ResumableBatchSampler's global order and
per-rank parts, ThreadDataLoader.state_dict / load_state_dict over a
DistDataset (prefetch 0 and 2, every method), and the refusals of an
incompatible state. The resumed training runs, in new jobs on other rank
counts, are tests/scripts/torch_resume.sh.
"""

import itertools

import numpy as np
import pytest

from helpers import agree
from pyddstore.torch import DistDataset, ResumableBatchSampler, ThreadDataLoader, global_order
from torch_helpers import METHODS, N, Checks, DictSource, ds_kwargs, teardown, threads_for

_count = itertools.count()


def ids(batch):
    """The global sample indices of a DictSource batch (y = 11 i)."""
    return (batch["y"] // 11).tolist()


# -- the global order and the parts (no store) ------------------------------

def test_global_order_is_fixed():
    # The algorithm is part of the contract (a resume with a newer numpy or
    # torch must give the same order): these values pin it.
    assert global_order(10, 0, 0).tolist() == PINNED_0_0
    assert global_order(10, 5, 3).tolist() == PINNED_5_3
    for seed, epoch in [(0, 0), (1, 0), (0, 1), (2**64 - 1, 7)]:
        o = global_order(1000, seed, epoch)
        assert o.dtype == np.int64 and sorted(o.tolist()) == list(range(1000))
        assert np.array_equal(o, global_order(1000, seed, epoch))
    assert not np.array_equal(global_order(1000, 0, 0), global_order(1000, 0, 1))
    assert not np.array_equal(global_order(1000, 0, 0), global_order(1000, 1, 0))
    assert global_order(5, 3, 1, shuffle=False).tolist() == [0, 1, 2, 3, 4]
    assert global_order(0, 3, 1).tolist() == []


PINNED_0_0 = [0, 7, 8, 2, 5, 9, 4, 6, 3, 1]
PINNED_5_3 = [2, 5, 6, 8, 0, 7, 1, 4, 3, 9]


def _splitmix64(z):
    m = (1 << 64) - 1
    z = (z + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_global_order_is_the_documented_rule():
    """docs/pytorch.md's rule, written out on Python integers."""
    m = (1 << 64) - 1
    for n, seed, epoch in [(50, 0, 0), (50, 123456789, 4), (7, 2**64 - 1, 2**40)]:
        base = _splitmix64((_splitmix64(seed) + epoch) & m)
        keys = [_splitmix64((base + i * 0x9E3779B97F4A7C15) & m) for i in range(n)]
        assert global_order(n, seed, epoch).tolist() == sorted(range(n), key=lambda i: keys[i])


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("n,g", [(37, 8), (40, 8), (12, 4), (8, 8)])
def test_parts_make_the_global_batches(n, g, drop_last):
    """For every P dividing G, the parts of step k in rank order are global batch k."""
    order = global_order(n, 9, 2)
    full = [order[b * g:(b + 1) * g].tolist() for b in range(n // g if drop_last else -(-n // g))]
    for p in (1, 2, 4):
        if g % p or (not drop_last and 0 < n % g < p):
            continue
        samplers = [ResumableBatchSampler(n, g, seed=9, drop_last=drop_last, num_replicas=p, rank=r)
                    for r in range(p)]
        for s in samplers:
            s.set_epoch(2)
            assert len(s) == len(full)
        steps = list(zip(*[list(s) for s in samplers]))
        assert [sum(parts, []) for parts in steps] == full, p
        sizes = [[len(x) for x in parts] for parts in steps]
        assert all(max(z) - min(z) <= 1 and min(z) > 0 for z in sizes), sizes


def test_sampler_refusals():
    with pytest.raises(ValueError, match=r"global_batch_size=6 is not a multiple of the number of ranks \(4\)"):
        ResumableBatchSampler(40, 6, num_replicas=4, rank=0)
    with pytest.raises(ValueError, match=r"last global batch holds 1 sample\(s\) \(37 % 4\), fewer than the 2 "
                                         "ranks: pass drop_last=True"):
        ResumableBatchSampler(37, 4, num_replicas=2, rank=1)
    assert len(ResumableBatchSampler(37, 4, num_replicas=2, rank=1, drop_last=True)) == 9
    with pytest.raises(ValueError, match="global_batch_size must be 1 or more, got 0"):
        ResumableBatchSampler(40, 0, num_replicas=1, rank=0)
    with pytest.raises(ValueError, match="rank must be 0 to 1, got 2"):
        ResumableBatchSampler(40, 4, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="seed must be 0 to"):
        ResumableBatchSampler(40, 4, seed=-1, num_replicas=1, rank=0)
    with pytest.raises(TypeError, match="seed must be an int, got float"):
        ResumableBatchSampler(40, 4, seed=1.5, num_replicas=1, rank=0)


def test_sampler_defaults_to_the_communicator(comm):
    s = ResumableBatchSampler(list(range(40)), 4 * comm.size)
    assert (s.num_replicas, s.rank, s.length) == (comm.size, comm.rank, 40)


# -- the loader's state over a DistDataset -----------------------------------

def make(comm, method):
    return DistDataset(DictSource(), f"rs{next(_count)}", comm=comm, **ds_kwargs(method))


@pytest.mark.parametrize("method", METHODS)
def test_resume_yields_the_remaining_batches(comm, method):
    """Stopped after k batches of epoch 1 with reads ahead in flight, then
    loaded into a new loader (same P, and P = 1 on every rank, which reads
    whole global batches): the rest of the uninterrupted epoch, then the
    next epoch; prefetch 0 and 2 on both sides."""
    ds = make(comm, method)
    c = Checks()
    g = 4 * comm.size if comm.size > 1 else 8
    mk = lambda pf, p=comm.size, r=comm.rank, reuse=False: ThreadDataLoader(  # noqa: E731
        ds, batch_sampler=ResumableBatchSampler(ds, g, seed=4, num_replicas=p, rank=r),
        num_workers=threads_for(method), prefetch=pf, reuse_buffers=reuse)
    ref = mk(0)
    epochs = {}
    for e in (1, 2):
        ref.batch_sampler.set_epoch(e)
        epochs[e] = [ids(b) for b in ref]
    c.true(ref.state_dict()["batches_consumed"] == len(ref), f"end of epoch: {ref.state_dict()}")
    ref.close()
    for pf_stop, pf_resume, k in [(2, 0, 2), (0, 2, 3), (2, 2, 1)]:
        stop = mk(pf_stop)
        stop.batch_sampler.set_epoch(1)
        it = iter(stop)
        got = [ids(next(it)) for _ in range(k)]
        state = stop.state_dict()
        c.true(state == {"version": 1, "epoch": 1, "batches_consumed": k, "dataset_length": N, "seed": 4,
                         "global_batch_size": g, "shuffle": True, "drop_last": False,
                         "world_size": comm.size}, f"state after {k} (prefetch {pf_stop}): {state}")
        c.true(got == epochs[1][:k], f"first {k} batches")
        stop.close()
        # Same P.
        again = mk(pf_resume, reuse=True)  # buffers of G/P rows
        c.true(all(len(b["x"]) == g // comm.size for b in again.buffer_sets), "buffer rows")
        again.load_state_dict(state)
        again.batch_sampler.set_epoch(1)  # the same epoch: keeps the position
        c.true(again.state_dict() == state, f"state right after load: {again.state_dict()}")
        rest = [ids(b) for b in again]
        c.true(rest == epochs[1][k:], f"resumed epoch (k={k}): {rest} != {epochs[1][k:]}")
        again.batch_sampler.set_epoch(2)
        c.true([ids(b) for b in again] == epochs[2], "the epoch after the resumed one")
        again.close()
        # One rank's worth on every rank: whole global batches.
        whole = mk(pf_resume, 1, 0)
        whole.load_state_dict(state)
        parts = [comm.allgather(b) for b in epochs[1][k:]]
        c.true([ids(b) for b in whole] == [sum(p, []) for p in parts], "resumed on P=1")
        whole.close()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


def test_state_follows_set_epoch_and_iterators(comm):
    ds = make(comm, METHODS[0])
    loader = ThreadDataLoader(ds, batch_sampler=ResumableBatchSampler(ds, 4 * comm.size, drop_last=True),
                              prefetch=2)
    s = loader.batch_sampler
    try:
        assert loader.state_dict()["epoch"] == 0 and loader.state_dict()["batches_consumed"] == 0
        it = iter(loader)
        next(it)
        assert loader.state_dict()["batches_consumed"] == 1
        s.set_epoch(3)  # a new epoch not yet iterated: its start
        assert (loader.state_dict()["epoch"], loader.state_dict()["batches_consumed"]) == (3, 0)
        it.close()
        state = dict(loader.state_dict(), epoch=5, batches_consumed=2)
        loader.load_state_dict(state)
        assert loader.state_dict() == state
        s.set_epoch(6)  # another epoch: the restored position is dropped
        assert loader.state_dict()["batches_consumed"] == 0
        loader.load_state_dict(state)
        assert len(list(loader)) == len(loader) - 2
        assert loader.state_dict()["batches_consumed"] == len(loader)
        assert len(list(loader)) == len(loader)  # a resume applies once
    finally:
        loader.close()
        teardown(comm, ds)


def test_incompatible_states(comm):
    ds = make(comm, METHODS[0])
    loader = ThreadDataLoader(ds, batch_sampler=ResumableBatchSampler(ds, 4 * comm.size, seed=3, drop_last=True),
                              prefetch=0)
    plain = ThreadDataLoader(ds, batch_size=2, prefetch=0)
    try:
        good = loader.state_dict()
        for key, value in [("dataset_length", N + 1), ("seed", 4), ("global_batch_size", 8 * comm.size),
                           ("shuffle", False), ("drop_last", False)]:
            with pytest.raises(ValueError, match=f"load_state_dict: incompatible {key}: {value!r} in the state, "
                                                 f"{good[key]!r} in this loader's sampler"):
                loader.load_state_dict(dict(good, **{key: value}))
        with pytest.raises(ValueError, match=r"the state's batches_consumed must be 0 to \d+, got 99"):
            loader.load_state_dict(dict(good, batches_consumed=99))
        with pytest.raises(ValueError, match=r"the state lacks \['seed'\]"):
            loader.load_state_dict({k: v for k, v in good.items() if k != "seed"})
        with pytest.raises(ValueError, match="state version 2, this pyddstore reads version 1"):
            loader.load_state_dict(dict(good, version=2))
        with pytest.raises(TypeError, match="the state must be a dict"):
            loader.load_state_dict([1, 2])
        assert loader.state_dict() == good  # refused states change nothing
        # Another world size is fine: the order does not depend on it.
        loader.load_state_dict(dict(good, world_size=comm.size * 2, batches_consumed=1))
        for what in ("state_dict", "load_state_dict"):
            with pytest.raises(TypeError, match=f"ThreadDataLoader.{what} needs batch_sampler="
                                                "ResumableBatchSampler.*is BatchSampler"):
                getattr(plain, what)(*([good] if what == "load_state_dict" else []))
        with pytest.raises(ValueError, match=r"reuse_buffers needs batch_size \(automatic batching\) or a "
                                             "ResumableBatchSampler: the buffers hold a batch's rows"):
            ThreadDataLoader(ds, batch_sampler=[[0, 1]], reuse_buffers=True)
        with pytest.raises(TypeError, match="pass it as batch_sampler=, not sampler="):
            ThreadDataLoader(ds, batch_size=1, sampler=ResumableBatchSampler(ds, comm.size, drop_last=True))
    finally:
        loader.close()
        plain.close()
        teardown(comm, ds)
