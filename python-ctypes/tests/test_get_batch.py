"""DDStore 3.0's test_get_batch: arbitrary rows in any order from any owner.

Every rank holds 16 rows x 5 columns; global row r holds r*100 + column, so a
misplaced row is detected exactly. Method 0's get_batch is collective: every
rank makes the same sequence of calls (with different indices)."""

import threading

import numpy as np
import pytest

from helpers import RankChecks, METHODS, make_store

ROWS, COLS = 16, 5


def expected(indices, dtype=np.float32):
    idx = np.asarray(indices, dtype=np.int64)
    return (idx[:, None] * 100 + np.arange(COLS)).astype(dtype)


def setup_store(comm, method, dtype=np.float32, name="x"):
    store = make_store(comm, method)
    first = comm.rank * ROWS
    store.add(name, expected(np.arange(first, first + ROWS), dtype))
    store.epoch_begin()
    return store


def teardown_store(comm, store):
    store.epoch_end()
    comm.Barrier()
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_batch_all_ranks_shuffled_with_repeats(comm, method):
    store = setup_store(comm, method)
    total = ROWS * comm.size
    idx = np.random.default_rng(comm.rank).integers(0, total, 200)
    idx[:comm.size] = np.arange(comm.size) * ROWS  # touch every shard
    out = np.empty((len(idx), COLS), np.float32)
    store.get_batch("x", out, idx)
    ck = RankChecks(comm)
    ck(np.array_equal(out, expected(idx)), 'np.array_equal(out, expected(idx))')
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_batch_matches_per_row_get(comm, method):
    store = setup_store(comm, method)
    idx = np.arange(ROWS * comm.size)[::-1]
    batch = np.empty((len(idx), COLS), np.float32)
    store.get_batch("x", batch, idx)
    one = np.empty((len(idx), COLS), np.float32)
    for i, g in enumerate(idx):
        store.get("x", one[i:i + 1], g)
    ck = RankChecks(comm)
    ck(np.array_equal(batch, one) and np.array_equal(batch, expected(idx)), 'np.array_equal(batch, one) and np.array_equal(batch, expected(idx))')
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_batch_single_row(comm, method):
    store = setup_store(comm, method)
    g = ((comm.rank + 1) % comm.size) * ROWS + 3
    out = np.empty((1, COLS), np.float32)
    store.get_batch("x", out, [g])
    ck = RankChecks(comm)
    ck(np.array_equal(out, expected([g])), 'np.array_equal(out, expected([g]))')
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_batch_empty_on_some_ranks(comm, method):
    """The number of indices may differ per rank, zero included."""
    store = setup_store(comm, method)
    idx = np.arange(comm.rank) * 7 % (ROWS * comm.size)
    out = np.empty((len(idx), COLS), np.float32)
    store.get_batch("x", out, idx)
    ck = RankChecks(comm)
    ck(np.array_equal(out, expected(idx)), 'np.array_equal(out, expected(idx))')
    store.get_batch("x", np.empty((0, COLS), np.float32), [])
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float32, np.int64, np.float64],
                         ids=lambda t: np.dtype(t).name)
def test_batch_dtypes(comm, method, dtype):
    total = ROWS * comm.size
    # uint8 holds values below 256 only: rows 0-2.
    idx = [0, 2, 1] if dtype is np.uint8 else [total - 1, 0, total // 2]
    store = setup_store(comm, method, dtype)
    out = np.empty((len(idx), COLS), dtype)
    store.get_batch("x", out, idx)
    ck = RankChecks(comm)
    ck(np.array_equal(out, expected(idx, dtype)), 'np.array_equal(out, expected(idx, dtype))')
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_batch_indices_list_and_int32(comm, method):
    """Indices may be any sequence convertible to int64."""
    store = setup_store(comm, method)
    idx = [1, ROWS * comm.size - 1]
    out = np.empty((2, COLS), np.float32)
    store.get_batch("x", out, idx)
    ck = RankChecks(comm)
    ck(np.array_equal(out, expected(idx)), 'np.array_equal(out, expected(idx))')
    store.get_batch("x", out, np.array(idx, np.int32))
    ck(np.array_equal(out, expected(idx)), 'np.array_equal(out, expected(idx))')
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_batch_errors_leave_store_usable(comm, method):
    store = setup_store(comm, method)
    total = ROWS * comm.size
    with pytest.raises(IndexError, match=str(total + 5)):
        store.get_batch("x", np.empty((2, COLS), np.float32), [0, total + 5])
    with pytest.raises(ValueError, match="arr has 2 rows but 3 indices were given"):
        store.get_batch("x", np.empty((2, COLS), np.float32), [0, 1, 2])
    with pytest.raises(ValueError, match="Invalid data type"):
        store.get_batch("x", np.empty((2, COLS), np.float64), [0, 1])
    with pytest.raises(ValueError, match="indices must be one-dimensional"):
        store.get_batch("x", np.empty((2, COLS), np.float32), [[0], [1]])
    idx = [total - 1, 0]
    out = np.empty((2, COLS), np.float32)
    store.get_batch("x", out, idx)
    ck = RankChecks(comm)
    ck(np.array_equal(out, expected(idx)), 'np.array_equal(out, expected(idx))')
    teardown_store(comm, store)
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_batch_error_on_one_rank_only(comm, method):
    """A bad argument on one rank must not leave the others waiting in
    method 0's collective: they fail too, then everyone carries on."""
    store = setup_store(comm, method)
    idx = [0, 1]
    dtype = np.float64 if comm.rank == 0 else np.float32
    out = np.empty((2, COLS), dtype)
    raised = None
    try:
        store.get_batch("x", out, idx)
    except ValueError as exc:
        raised = exc
    ck = RankChecks(comm)
    if comm.rank == 0:
        ck(raised is not None and "Invalid data type" in str(raised), f"rank 0 raised {raised!r}")
    elif method == 0:
        ck(raised is not None and "rank 0" in str(raised), f"raised {raised!r}, not naming rank 0")
    else:
        ck(raised is None, f"one-sided: only the faulty rank fails, but this one raised {raised!r}")
    out = np.empty((2, COLS), np.float32)
    store.get_batch("x", out, idx)
    ck(np.array_equal(out, expected(idx)), 'np.array_equal(out, expected(idx))')
    teardown_store(comm, store)
    ck.done()


def _reader(store, pool, iterations, total, seed, errors):
    rng = np.random.default_rng(seed)
    try:
        for _ in range(iterations):
            at = rng.integers(0, pool.shape[0] - 17)
            idx = rng.integers(0, total, 16)
            store.get_batch("x", pool[at:at + 16], idx)
            if not np.array_equal(pool[at:at + 16], expected(idx)):
                errors.append("batch mismatch")
            g = int(rng.integers(0, total))
            store.get("x", pool[at + 16:at + 17], g)
            if not np.array_equal(pool[at + 16:at + 17], expected([g])):
                errors.append("get mismatch")
    except Exception as exc:  # reported by the main thread
        errors.append(repr(exc))


@pytest.mark.parametrize("method", METHODS)
def test_register_recv_pool(comm, method):
    store = setup_store(comm, method)
    total = ROWS * comm.size
    pools = [np.zeros((64, COLS), np.float32) for _ in range(2)]
    for pool in pools:
        store.register_recv("x", pool)
    store.register_recv("x", pools[0])  # the same buffer again: a no-op
    before = store.get_profile("x")["mr_miss"]
    errors = []
    if method == 0:
        # get_batch is collective: one thread per rank, in step.
        for i, pool in enumerate(pools):
            _reader(store, pool, 40, total, 10 * comm.rank + i, errors)
    else:
        threads = [threading.Thread(target=_reader, args=(store, pool, 40, total, 10 * comm.rank + i, errors))
                   for i, pool in enumerate(pools)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ck = RankChecks(comm)
    ck(not errors, 'not errors')
    ck(store.get_profile("x")["mr_miss"] == before, 'store.get_profile("x")["mr_miss"] == before')
    for pool in pools:
        store.unregister_recv("x", pool)
    if method == 0:
        store.unregister_recv("x", pools[0])  # unknown buffer: silently ignored
    else:
        with pytest.raises(ValueError, match="buffer is not registered for 'x'"):
            store.unregister_recv("x", pools[0])
    # An unregistered buffer still works as a destination.
    store.get_batch("x", pools[0][:2], [0, total - 1])
    ck(np.array_equal(pools[0][:2], expected([0, total - 1])), 'np.array_equal(pools[0][:2], expected([0, total - 1]))')
    teardown_store(comm, store)
    ck.done(errors)


@pytest.mark.parametrize("method", METHODS)
def test_wide_rows(comm, method):
    width = 3001  # 12,004-byte rows
    store = make_store(comm, method)
    first = 4 * comm.rank
    local = (np.arange(first, first + 4)[:, None] * 10000 + np.arange(width)).astype(np.float32)
    store.add("w", local)
    total = 4 * comm.size
    nxt = (comm.rank + 1) % comm.size
    idx = [4 * nxt + 3, 0, total - 1]
    want = (np.array(idx)[:, None] * 10000 + np.arange(width)).astype(np.float32)
    out = np.empty((3, width), np.float32)
    store.epoch_begin()
    store.get_batch("w", out, idx)
    ck = RankChecks(comm)
    ck(np.array_equal(out, want), 'np.array_equal(out, want)')
    one = np.empty((1, width), np.float32)
    store.get("w", one, idx[0])
    ck(np.array_equal(one[0], want[0]), 'np.array_equal(one[0], want[0])')
    store.epoch_end()
    store.free()
    ck.done()
