"""DDStore 3.0's test_multirank: remote reads across shards, and groups
(ddstore_width). Meaningful from 2 ranks; also runs (all-local) on 1."""

import numpy as np
import pytest

from helpers import RankChecks, METHODS, handshake_dir, make_store


@pytest.mark.parametrize("method", METHODS)
def test_remote_get_all_ranks(comm, method):
    store = make_store(comm, method)
    store.add("x", np.full((8, 4), comm.rank + 1, np.float32))
    out = np.empty((1, 4), np.float32)
    ck = RankChecks(comm)
    store.epoch_begin()
    for r in range(comm.size):
        store.get("x", out, 8 * r)
        ck(bool((out == r + 1).all()), 'bool((out == r + 1).all())')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_remote_get_last_row(comm, method):
    local = (np.arange(8 * 4).reshape(8, 4) + 1000 * comm.rank).astype(np.int64)
    store = make_store(comm, method)
    store.add("x", local)
    out = np.empty((1, 4), np.int64)
    ck = RankChecks(comm)
    store.epoch_begin()
    for r in range(comm.size):
        store.get("x", out, 8 * r + 7)
        ck(bool(np.array_equal(out[0], np.arange(28, 32) + 1000 * r)), 'bool(np.array_equal(out[0], np.arange(28, 32) + 1000 * r))')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_init_update_remote_get(comm, method):
    store = make_store(comm, method)
    store.init("x", 8, 4, itemsize=4)
    store.update("x", np.full((8, 4), comm.rank + 10, np.int32), 0)
    out = np.empty((1, 4), np.int32)
    ck = RankChecks(comm)
    store.epoch_begin()  # makes every rank's update visible
    for r in range(comm.size):
        store.get("x", out, 8 * r + 3)
        ck(bool((out == r + 10).all()), 'bool((out == r + 10).all())')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_multiple_variables_remote(comm, method):
    store = make_store(comm, method)
    store.add("a", np.full((8, 4), comm.rank + 1, np.float64))
    store.add("b", np.full((8, 4), comm.rank + 100, np.float64))
    out = np.empty((1, 4), np.float64)
    ck = RankChecks(comm)
    store.epoch_begin()
    for r in range(comm.size):
        store.get("a", out, 8 * r)
        ck(bool((out == r + 1).all()), 'bool((out == r + 1).all())')
        store.get("b", out, 8 * r + 7)
        ck(bool((out == r + 100).all()), 'bool((out == r + 100).all())')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_uneven_and_zero_row_shards(comm, method):
    """Rank r holds r rows (rank 0 none): zero-row add is allowed for us."""
    rows = comm.rank
    local = np.full((rows, 3), comm.rank, np.int32)
    store = make_store(comm, method)
    store.add("x", local)
    total = sum(range(comm.size))
    ck = RankChecks(comm)
    ck(store.info("x") == (total, 3, 4), 'store.info("x") == (total, 3, 4)')
    out = np.empty((1, 3), np.int32)
    store.epoch_begin()
    g = 0
    for r in range(comm.size):
        for _ in range(r):
            store.get("x", out, g)
            ck(bool((out == r).all()), 'bool((out == r).all())')
            g += 1
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_ddstore_width(comm, method):
    """PyDDStore(comm, ddstore_width=2): groups of 2 consecutive ranks, each an
    independent store. With 2 ranks or fewer that is one group of all ranks."""
    width = 2
    size, rank = comm.size, comm.rank
    if size > width:
        group = rank // width
        members = list(range(group * width, min(size, (group + 1) * width)))
        assert size < 4 or len(members) == 2
    else:
        group, members = 0, list(range(size))  # single-group behaviour
    kw = {"ddstore_width": width}
    if method == 2:
        kw["handshake_dir"] = handshake_dir(f"-g{group}")
    store = make_store(comm, method, **kw)
    store.add("x", np.full((8, 4), rank + 1, np.float32))
    ck = RankChecks(comm)
    ck(store.info("x") == (8 * len(members), 4, 4), 'store.info("x") == (8 * len(members), 4, 4)')
    out = np.empty((1, 4), np.float32)
    store.epoch_begin()
    for i, member in enumerate(members):
        store.get("x", out, 8 * i)
        ck(bool((out == member + 1).all()), 'bool((out == member + 1).all())')
    store.epoch_end()
    # Rows past the group's end are out of range: the groups are independent.
    try:
        store.get("x", out, 8 * len(members))
        ck(False, "a row past the group's end was read")
    except IndexError:
        pass
    store.free()
    ck.done()
