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
