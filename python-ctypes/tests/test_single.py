"""DDStore 3.0's test_single, for any rank count: add/init/update/get and the
basic errors. Each rank holds a shard whose values identify its global rows."""

import numpy as np
import pytest

from helpers import RankChecks, METHODS, make_store, shards

DTYPES = [np.int32, np.int64, np.uint8, np.float32, np.float64, np.bool_]


def local_rows(comm, rows, cols, dtype):
    """This rank's shard: global element e holds e (mod 256 for uint8), bools alternate."""
    first = comm.rank * rows * cols
    values = np.arange(first, first + rows * cols).reshape(rows, cols)
    if dtype is np.bool_:
        return values % 2 == 0
    return (values % 256 if dtype is np.uint8 else values).astype(dtype)


def read_all(store, name, whole, inside_epoch=True):
    """Reads every global row one at a time; True if all match `whole`."""
    out = np.empty((1,) + whole.shape[1:], whole.dtype)
    ok = True
    if inside_epoch:
        store.epoch_begin()
    for g in range(whole.shape[0]):
        store.get(name, out, g)
        ok &= bool(np.array_equal(out[0], whole[g]))
    if inside_epoch:
        store.epoch_end()
    return ok


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_add_get_dtypes(comm, method, dtype):
    local = local_rows(comm, 4, 4, dtype)
    store = make_store(comm, method)
    store.add("x", local)
    ck = RankChecks(comm)
    ck(read_all(store, "x", shards(comm, local)), 'read_all(store, "x", shards(comm, local))')
    ck(store.info("x") == (4 * comm.size, 4, np.dtype(dtype).itemsize), 'store.info("x") == (4 * comm.size, 4, np.dtype(dtype).itemsize)')
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_init_update_get(comm, method):
    store = make_store(comm, method)
    store.init("x", 4, 8, itemsize=4)
    data = local_rows(comm, 4, 8, np.float32)
    store.update("x", data, 0)
    ck = RankChecks(comm)
    ck(read_all(store, "x", shards(comm, data)), 'read_all(store, "x", shards(comm, data))')
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_init_is_zero_filled(comm, method):
    store = make_store(comm, method)
    store.init("z", 3, 2, itemsize=8)
    ck = RankChecks(comm)
    ck(read_all(store, "z", np.zeros((3 * comm.size, 2), np.int64)), 'read_all(store, "z", np.zeros((3 * comm.size, 2), np.int64))')
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_update_partial(comm, method):
    store = make_store(comm, method)
    store.init("x", 8, 4, itemsize=4)
    store.update("x", np.full((4, 4), 1.0, np.float32), 0)
    store.update("x", np.full((4, 4), 2.0, np.float32), 4)
    store.epoch_begin()
    out = np.empty((1, 4), np.float32)
    base = 8 * comm.rank
    store.get("x", out, base)
    ck = RankChecks(comm)
    ck(bool((out == 1.0).all()), 'bool((out == 1.0).all())')
    store.get("x", out, base + 4)
    ck(bool((out == 2.0).all()), 'bool((out == 2.0).all())')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_multiple_variables(comm, method):
    store = make_store(comm, method)
    store.add("a", np.full((4, 4), 1.0, np.float32))
    store.add("b", np.full((4, 4), 2.0, np.float32))
    ck = RankChecks(comm)
    ck(read_all(store, "a", np.full((4 * comm.size, 4), 1.0, np.float32)), 'read_all(store, "a", np.full((4 * comm.size, 4), 1.0, np.float32))')
    ck(read_all(store, "b", np.full((4 * comm.size, 4), 2.0, np.float32)), 'read_all(store, "b", np.full((4 * comm.size, 4), 2.0, np.float32))')
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_get_out_of_range(comm, method):
    store = make_store(comm, method)
    store.add("x", np.zeros((4, 4), np.float32))
    start = 100 * comm.size
    with pytest.raises(IndexError, match=f"{start} is out of range"):
        store.get("x", np.empty((1, 4), np.float32), start)
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_get_negative_index(comm, method):
    store = make_store(comm, method)
    store.add("x", np.zeros((4, 4), np.float32))
    with pytest.raises(IndexError, match="-1"):
        store.get("x", np.empty((1, 4), np.float32), -1)
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_get_unknown_name(comm, method):
    store = make_store(comm, method)
    store.add("x", np.zeros((4, 4), np.float32))
    with pytest.raises(IndexError, match="nosuch"):
        store.get("nosuch", np.empty((1, 4), np.float32), 0)
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_get_wrong_dtype(comm, method):
    store = make_store(comm, method)
    store.add("x", np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="Invalid data type"):
        store.get("x", np.empty((1, 4), np.float64), 0)
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_double_free(comm, method):
    store = make_store(comm, method)
    store.add("x", np.zeros((4, 4), np.float32))
    store.free()
    store.free()


@pytest.mark.parametrize("method", METHODS)
def test_start_accepts_numpy_integers(comm, method):
    """HydraGNN passes start as a positional numpy.int64."""
    local = local_rows(comm, 4, 3, np.int64)
    whole = shards(comm, local)
    store = make_store(comm, method)
    store.add("x", local)
    out = np.empty((1, 3), np.int64)
    ck = RankChecks(comm)
    store.epoch_begin()
    for start in (np.int64(whole.shape[0] - 1), np.int32(1), np.uint64(2), 3):
        store.get("x", out, start)
        ck(bool(np.array_equal(out[0], whole[int(start)])), 'bool(np.array_equal(out[0], whole[int(start)]))')
    store.epoch_end()
    store.free()
    ck.done()


@pytest.mark.parametrize("method", METHODS)
def test_get_several_rows_of_one_shard(comm, method):
    local = local_rows(comm, 6, 2, np.float64)
    whole = shards(comm, local)
    store = make_store(comm, method)
    store.add("x", local)
    out = np.empty((4, 2), np.float64)
    store.epoch_begin()
    ck = RankChecks(comm)
    for r in range(comm.size):
        store.get("x", out, 6 * r + 1)
        ck(bool(np.array_equal(out, whole[6 * r + 1:6 * r + 5])), 'bool(np.array_equal(out, whole[6 * r + 1:6 * r + 5]))')
    store.epoch_end()
    store.free()
    ck.done()
