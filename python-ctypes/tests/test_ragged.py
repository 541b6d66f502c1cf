"""Ragged variables through pyddstore (issue 21): add_ragged in both forms,
get_ragged, get_ragged_batch (+ split_ragged), get_ragged_batch_into,
ragged_lengths, for every available method (method 0 in both batch modes),
every byte checked against a formula; bad inputs raise on every rank.

Hypothesis boundary tests draw sample indices at, just past and far past
the end (and negative, and beyond int64) and destination sizes around the
bytes needed. Settings are derandomized and database-less, so every rank
draws the same examples (the reads are collective in method 0's collective
mode), as tests/test_properties.py does.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyddstore as dds
from helpers import METHODS, RankChecks, make_store

SETTINGS = dict(derandomize=True, database=None, deadline=None, print_blob=False, max_examples=20,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

CASES = [(m, mode) for m in METHODS for mode in ((None, "onesided") if m == 0 else (None,))]
F = 3  # row shape (F,): node features


def n_of(r, size):
    """Samples of rank r: odd ranks hold none (when there are several)."""
    return 0 if (size > 1 and r % 2 == 1) else 4 + r


def first_of(r, size):
    return sum(n_of(q, size) for q in range(r))


def len_of(g):
    """Rows of sample g: 0 every 3rd, sample 1 holds most of the data."""
    if g == 1:
        return 600
    return 0 if g % 3 == 0 else 1 + (g * 5) % 7


def sample(g):
    n = len_of(g)
    return (np.arange(n * F, dtype=np.float32).reshape(n, F) + 1000.0 * g)


def _store(comm, method, mode, form):
    s = make_store(comm, method, batch_mode=mode) if method == 0 else make_store(comm, method)
    r, p = comm.Get_rank(), comm.Get_size()
    mine = [sample(first_of(r, p) + i) for i in range(n_of(r, p))]
    if form == "list":
        s.add_ragged("x", mine, dtype=np.float32, row_shape=(F,))
    else:
        flat = np.concatenate(mine) if mine else np.zeros((0, F), np.float32)
        s.add_ragged("x", flat, [len(a) for a in mine])
    return s, first_of(p, p)


@pytest.mark.parametrize("method,mode", CASES)
@pytest.mark.parametrize("form", ["flat", "list"])
def test_roundtrip(comm, method, mode, form):
    s, total = _store(comm, method, mode, form)
    ck = RankChecks(comm)
    idx = np.arange(total)[::-1]
    flat, lens = s.get_ragged_batch("x", idx)
    ck(flat.dtype == np.float32 and flat.shape == (sum(len_of(g) for g in idx), F), f"shape {flat.shape}")
    ck(list(lens) == [len_of(g) for g in idx], "lengths")
    for g, view in zip(idx, dds.split_ragged(flat, lens)):
        ck(np.array_equal(view, sample(g)), f"sample {g}")
    # Repeats, any order, a different count per rank.
    rng = np.random.default_rng(3 + comm.Get_rank())
    idx = rng.integers(0, total, size=2 * total + comm.Get_rank())
    flat, lens = s.get_ragged_batch("x", idx)
    ck(all(np.array_equal(v, sample(g)) for g, v in zip(idx, dds.split_ragged(flat, lens))), "random batch")
    ck(list(s.ragged_lengths("x", idx)) == [len_of(g) for g in idx], "ragged_lengths")
    one = s.get_ragged("x", 1)
    ck(np.array_equal(one, sample(1)), "get_ragged(1)")
    ck(s.get_ragged("x", 0).shape == (0, F), "empty sample")
    empty, elens = s.get_ragged_batch("x", [])
    ck(empty.shape == (0, F) and len(elens) == 0, "empty batch")
    # Into a caller's (larger) buffer.
    out = np.full(5000, -1.0, np.float32)
    view, lens = s.get_ragged_batch_into("x", out, [2, 1, 2])
    ck(np.array_equal(view, np.concatenate([sample(2), sample(1), sample(2)])), "into")
    ck(np.shares_memory(view, out), "into: a view of out")
    info = s._info(s._var("x").cname)
    ck(info.is_ragged == 1 and info.total_samples == total, "dds_info")
    ck.done()
    s.free()


@pytest.mark.parametrize("method,mode", CASES)
def test_bad_input_fails_everywhere(comm, method, mode):
    s = make_store(comm, method, batch_mode=mode) if method == 0 else make_store(comm, method)
    last = comm.Get_size() - 1
    flat = np.zeros((6, F), np.float32)
    mine = comm.Get_rank() == last
    with pytest.raises(dds.MismatchError, match=f"rank {last}: the lengths of its 2 samples sum to"):
        s.add_ragged("bad", flat, [1, 2] if mine else [3, 3])
    with pytest.raises(dds.InvalidArgumentError, match=f"rank {last}, local sample 1: length -3 is negative"):
        s.add_ragged("bad", flat, [9, -3] if mine else [3, 3])
    if comm.Get_size() > 1:
        other = np.zeros((9, 2), np.float32)
        with pytest.raises(dds.MismatchError, match=f"rank {last} has rows of 2 elements"):
            s.add_ragged("bad", other if mine else flat, [4, 5] if mine else [3, 3])
    # A Python-level error on one rank fails every rank (dds_fail_collective).
    with pytest.raises(dds.DDStoreError):
        s.add_ragged("bad", [np.zeros((2, F), np.float32), np.zeros((2, F + 1), np.float32)] if mine
                     else [np.zeros((2, F), np.float32)])
    s.add_ragged("good", flat, [3, 3])
    with pytest.raises(dds.InvalidArgumentError, match="not ragged"):
        s.add("fixed", flat)
        s.get_ragged_batch("fixed", [0])
    s.free()


def _boundaries(total):
    return [-2**63, -total - 1, -1, 0, 1, total - 1, total, total + 1, total + 1000, 2**31, 2**63 - 1]


@pytest.mark.parametrize("method,mode", CASES)
def test_boundaries(comm, method, mode):
    s, total = _store(comm, method, mode, "flat")

    @settings(**SETTINGS)
    @given(data=st.data())
    def check(data):
        idx = data.draw(st.lists(st.one_of(st.sampled_from(_boundaries(total)), st.integers(0, total - 1)),
                                 max_size=6), label="indices")
        slack = data.draw(st.integers(-2, 2), label="destination bytes - needed")
        every = comm.allgather((idx, slack))
        assert all(e == every[0] for e in every), "ranks drew different examples"
        bad = [k for k, g in enumerate(idx) if not 0 <= g < total]
        if bad:
            with pytest.raises(dds.IndexOutOfRangeError, match=f"index {bad[0]} of the batch, sample {idx[bad[0]]}"):
                s.get_ragged_batch("x", idx)
            return
        need = sum(len_of(g) for g in idx) * F * 4
        out = np.zeros(max(need + slack, 0), np.uint8)
        if len(out) < need:
            with pytest.raises(dds.MismatchError, match=f"{need} bytes are needed"):
                s.get_ragged_batch_into("x", out, idx, np.float32, (F,))
            return
        view, lens = s.get_ragged_batch_into("x", out, idx, np.float32, (F,))
        assert all(np.array_equal(v, sample(g)) for g, v in zip(idx, dds.split_ragged(view, lens)))

    try:
        check()
    finally:
        s.free()
