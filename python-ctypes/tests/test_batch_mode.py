"""PyDDStore(batch_mode=...): method 0's one-sided batches (issue 17) need no
matching calls on other ranks and count no request bytes; the collective
mode's request bytes are counted (get_profile)."""

import numpy as np
import pytest

import pyddstore as dds
from helpers import METHODS

pytestmark = pytest.mark.skipif(0 not in METHODS, reason="the library does not serve method 0")

ROWS, WIDTH = 20, 8


def _store(comm, mode):
    s = dds.PyDDStore(comm, method=0, batch_mode=mode)
    r = comm.Get_rank()
    data = (np.arange(ROWS * WIDTH, dtype=np.float64).reshape(ROWS, WIDTH) + 1000.0 * r)
    s.add("v", data)
    return s


def _want(idx):
    r, i = np.divmod(np.asarray(idx), ROWS)
    return (i[:, None] * WIDTH + np.arange(WIDTH)[None, :]) + 1000.0 * r[:, None]


def test_onesided_on_one_rank_only(comm):
    s = _store(comm, "onesided")
    assert s.batch_mode == "onesided"
    total = ROWS * comm.Get_size()
    rng = np.random.default_rng(7 + comm.Get_rank())
    # Rank r makes r + 1 calls; then rank 0 alone reads while the others wait.
    for _ in range(comm.Get_rank() + 1):
        idx = rng.integers(0, total, size=50)
        out = np.zeros((50, WIDTH))
        s.get_batch("v", out, idx)
        np.testing.assert_array_equal(out, _want(idx))
    comm.Barrier()
    if comm.Get_rank() == 0:
        idx = np.arange(total)[::-1].copy()
        out = np.zeros((total, WIDTH))
        s.get_batch("v", out, idx)
        np.testing.assert_array_equal(out, _want(idx))
    comm.Barrier()
    p = s.get_profile("v")
    assert p["req_bytes_sent"] == 0 and p["req_bytes_recv"] == 0
    s.free()


def test_collective_counts_request_bytes(comm):
    s = _store(comm, "collective")
    assert s.batch_mode == "collective"
    total = ROWS * comm.Get_size()
    idx = (np.arange(10) * 7 + comm.Get_rank()) % total
    out = np.zeros((10, WIDTH))
    s.get_batch("v", out, idx)
    np.testing.assert_array_equal(out, _want(idx))
    p = s.get_profile("v")
    assert p["req_bytes_sent"] >= 0 and p["req_bytes_recv"] >= 0
    sent = comm.allreduce(p["req_bytes_sent"])
    recv = comm.allreduce(p["req_bytes_recv"])
    assert sent == recv  # every byte sent is received by someone
    s.free()


def test_bad_batch_mode_is_refused(comm):
    with pytest.raises(dds.InvalidArgumentError, match="batch_mode"):
        dds.PyDDStore(comm, method=0, batch_mode="sometimes")
    with pytest.raises(TypeError):
        dds.PyDDStore(comm, method=0, batch_mode=1)


def test_auto_reads_right_and_every_rank_agrees(comm, monkeypatch):
    """batch_mode="auto" (issue 40): rows right through two checks on every
    rank's calls, the choice the same on every rank, errors of a collective
    batch of a check on every rank. A check is 1 to 4 rounds of 17 calls
    (more rounds while real timings do not tell the modes apart), so the
    calls go on until the second check (DDSTORE_BATCH_AUTO_RECHECK=2 after
    the first): 36 calls at the least, 2 * 68 + 2 at the most; the count of
    checks is the same on every rank, so every rank stops at the same call."""
    from helpers import RankChecks

    monkeypatch.setenv("DDSTORE_BATCH_AUTO_RECHECK", "2")
    s = _store(comm, "auto")
    ck = RankChecks(comm)
    ck(s.batch_mode == "auto", f"batch_mode {s.batch_mode}")
    ck(s.settings["batch_mode"] == "auto", f"settings {s.settings}")
    total = ROWS * comm.Get_size()
    rng = np.random.default_rng(11 + comm.Get_rank())
    # A bad index on the last rank in the first batch (collective) fails every rank.
    idx = np.arange(5) % total
    if comm.Get_rank() == comm.Get_size() - 1:
        idx[2] = total + 3
    with pytest.raises(dds.IndexOutOfRangeError, match=f"global row {total + 3}"):
        s.get_batch("v", np.zeros((5, WIDTH)), idx)
    modes = []
    calls, most = 1, 2 * 4 * 17 + 2
    while s.get_profile("v")["batch_checks"] < 2 and calls < most:
        idx = rng.integers(0, total, size=40)
        out = np.zeros((40, WIDTH))
        s.get_batch("v", out, idx)
        calls += 1
        ck(np.array_equal(out, _want(idx)), "rows of a batch")
        modes.append(s.get_profile("v")["batch_mode"])
    p = s.get_profile("v")
    ck(p["batch_checks"] == 2, f"checks {p['batch_checks']} after {calls} calls")
    ck(36 <= calls <= most, f"{calls} calls")
    ck(p["batch_calls_onesided"] >= 16, f"one-sided batches {p['batch_calls_onesided']}")
    every = comm.allgather(modes)
    ck(all(m == every[0] for m in every), f"modes differ across ranks: {every}")
    ck(set(modes) <= {"collective", "onesided"}, f"modes {modes}")
    ck.done()
    s.free()


def test_bad_auto_recheck_is_refused(comm, monkeypatch):
    monkeypatch.setenv("DDSTORE_BATCH_AUTO_RECHECK", "sometimes")
    with pytest.raises(dds.InvalidArgumentError, match="DDSTORE_BATCH_AUTO_RECHECK"):
        dds.PyDDStore(comm, method=0, batch_mode="auto")
