"""Every documented exception: its type (pyddstore's class, DDStore 3.0's
builtin) and what its message names."""

import ctypes
import pathlib
import tempfile

import numpy as np
import pytest

import pyddstore as dds
from pyddstore import _errors, _lib
from pyddstore._buffers import address
from helpers import METHODS, UNAVAILABLE, agree, handshake_dir, make_store

# status -> the builtin DDStore 3.0 raises there (see docs/python.md)
BUILTIN = {
    _errors.DDS_ERR_INVALID_ARGUMENT: ValueError,
    _errors.DDS_ERR_UNKNOWN_VARIABLE: IndexError,
    _errors.DDS_ERR_DUPLICATE_VARIABLE: ValueError,
    _errors.DDS_ERR_INDEX_OUT_OF_RANGE: IndexError,
    _errors.DDS_ERR_MISMATCH: ValueError,
    _errors.DDS_ERR_BAD_STATE: RuntimeError,
    _errors.DDS_ERR_UNSUPPORTED: NotImplementedError,
    _errors.DDS_ERR_MPI: RuntimeError,
    _errors.DDS_ERR_FABRIC: RuntimeError,
    _errors.DDS_ERR_GPU: RuntimeError,
    _errors.DDS_ERR_TIMEOUT: RuntimeError,
    _errors.DDS_ERR_NO_MEMORY: RuntimeError,
    _errors.DDS_ERR_IO: RuntimeError,
    _errors.DDS_ERR_INTERNAL: RuntimeError,
}


def test_status_table_is_complete():
    lib = _lib.load()
    for status in range(1, 15):
        assert lib.dds_status_string(status).decode().startswith("DDS_ERR_")
        exc = _errors.error_for(status, "msg")
        assert isinstance(exc, dds.DDStoreError) and isinstance(exc, BUILTIN[status])
        assert exc.status == status and str(exc) == "msg"
    assert lib.dds_status_string(15) == b"DDS_ERR_UNKNOWN_STATUS"
    assert isinstance(_errors.error_for(_errors.DDS_ERR_UNSUPPORTED, ""), RuntimeError)
    assert isinstance(_errors.error_for(_errors.DDS_ERR_TIMEOUT, ""), TimeoutError)
    odd = _errors.error_for(99, "boom")
    assert isinstance(odd, RuntimeError) and "99" in str(odd)


@pytest.fixture(params=METHODS)
def store(request, comm):
    s = make_store(comm, request.param)
    s.add("x", np.full((4, 3), comm.rank, np.float32))
    yield s
    comm.Barrier()
    s.free()


def test_unknown_variable(store):
    for call in (lambda: store.get("nope", np.empty((1, 3), np.float32), 0),
                 lambda: store.info("nope"),
                 lambda: store.get_profile("nope"),
                 lambda: store.update("nope", np.empty((1, 3), np.float32), 0),
                 lambda: store.register_recv("nope", np.empty((1, 3), np.float32))):
        with pytest.raises(dds.UnknownVariableError, match="'nope'") as info:
            call()
        assert isinstance(info.value, IndexError)


def test_unknown_variable_in_batch_fails_everywhere(store):
    with pytest.raises(IndexError, match="nope"):
        store.get_batch("nope", np.empty((1, 3), np.float32), [0])


def test_index_out_of_range(store, comm):
    total = 4 * comm.size
    with pytest.raises(dds.IndexOutOfRangeError, match=rf"{total}\b.*\[0, {total}\)"):
        store.get("x", np.empty((1, 3), np.float32), total)
    with pytest.raises(dds.IndexOutOfRangeError, match=str(-7)):
        store.get_batch("x", np.empty((1, 3), np.float32), [-7])


def test_duplicate_variable(store):
    with pytest.raises(dds.DuplicateVariableError, match="'x' already exists") as info:
        store.add("x", np.zeros((2, 3), np.float32))
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="'x'"):
        store.init("x", 2, 3, itemsize=4)


def test_destination_too_narrow(store):
    # DDStore 3.0 would overrun this buffer; we refuse it ([recommended]).
    with pytest.raises(dds.MismatchError, match="8 bytes") as info:
        store.get("x", np.empty((1, 2), np.float32), 0)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="bytes"):
        store.get_batch("x", np.empty((2, 2), np.float32), [0, 1])


def test_invalid_data_type(store):
    for dtype in (np.float64, np.uint8, np.int64):
        with pytest.raises(dds.MismatchError, match="Invalid data type"):
            store.get("x", np.empty((1, 3), dtype), 0)
        with pytest.raises(ValueError, match="Invalid data type"):
            store.update("x", np.empty((1, 3), dtype), 0)
    # Item size is what counts (as in DDStore): int32 into a float32 variable is allowed.
    store.get("x", np.empty((1, 3), np.int32), 0)


def test_get_range_crossing_a_shard(store, comm):
    if comm.size > 1:
        with pytest.raises(ValueError, match="shard"):
            store.get("x", np.empty((2, 3), np.float32), 3)
    with pytest.raises(IndexError):
        store.get("x", np.empty((2, 3), np.float32), 4 * comm.size)


@pytest.mark.parametrize("dtype", [np.float16, np.complex64, np.int16, np.uint32, np.int8])
def test_unsupported_dtype(store, dtype):
    arr = np.zeros((4, 3), dtype)
    name = np.dtype(dtype).name
    for call in (lambda: store.get("x", arr[:1], 0),
                 lambda: store.get_batch("x", arr[:1], [0]),
                 lambda: store.update("x", arr[:1], 0),
                 lambda: store.add("y", arr)):
        with pytest.raises(NotImplementedError, match=f"unsupported dtype: {name}") as info:
            call()
        assert isinstance(info.value, dds.DDStoreError)


def test_non_contiguous(store):
    wide = np.zeros((4, 6), np.float32)
    for call in (lambda: store.get("x", wide[:1, ::2], 0),
                 lambda: store.get_batch("x", wide[:2, ::2], [0, 1]),
                 lambda: store.update("x", wide[:1, ::2], 0),
                 lambda: store.add("y", wide[:, ::2])):
        with pytest.raises(ValueError, match="C-contiguous"):
            call()


def test_other_buffer_errors(store):
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty((1, 3), np.float32)
        ro.flags.writeable = False
        store.get("x", ro, 0)
    with pytest.raises(ValueError, match="at least one dimension"):
        store.get("x", np.float32(1.0), 0)
    with pytest.raises(TypeError, match="numpy array"):
        store.get("x", [1.0, 2.0, 3.0], 0)
    with pytest.raises(TypeError, match="name must be a str"):
        store.get(b"x", np.empty((1, 3), np.float32), 0)
    with pytest.raises(TypeError):
        store.get("x", np.empty((1, 3), np.float32), 1.5)
    with pytest.raises(IndexError):  # not rows of the variable, but a shard's end
        store.update("x", np.empty((1, 3), np.float32), 4)
    with pytest.raises(ValueError, match="whole number"):
        store.update("x", np.empty((1, 2), np.float32), 0)


def test_array_interface_objects(store, comm):
    """Objects exposing __array_interface__ are read into without a copy."""
    class Wrapped:
        def __init__(self, arr):
            self.arr = arr
            self.__array_interface__ = arr.__array_interface__
    target = np.zeros((1, 3), np.float32)
    store.epoch_begin()
    store.get("x", Wrapped(target), 4 * (comm.size - 1))
    store.epoch_end()
    assert agree(comm, (target == comm.size - 1).all())


class FakeGPU:
    """Looks like device memory to pyddstore (no GPU needed)."""
    def __init__(self, shape=(1, 3), typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (1 << 40, False),
                                         "version": 3}


def _driver():
    """(True, n) with a usable GPU driver, else (False, the library's reason)."""
    n = ctypes.c_int32(0)
    lib = _lib.load()
    if lib.dds_gpu_available(ctypes.byref(n)) == 0:
        return True, n.value
    return False, lib.dds_last_error().decode()


def test_fake_gpu_buffers_refused(store):
    """An object claiming device memory at an address the library does not
    know as device memory is refused before the address reaches the library's
    host paths: without a driver, the message says why."""
    have, why = _driver()
    want = "not CUDA device memory" if have else "cannot reach device memory"
    for call in (lambda: store.get("x", FakeGPU(), 0),
                 lambda: store.get_batch("x", FakeGPU(), [0]),
                 lambda: store.register_recv("x", FakeGPU()),
                 lambda: store.add("g", FakeGPU((4, 3))),
                 lambda: store.update("x", FakeGPU(), 0)):
        with pytest.raises(RuntimeError, match=want) as info:
            call()
        assert isinstance(info.value, dds.GPUBufferError)
        if not have:
            assert "libcuda" in str(info.value) or "CUDA" in str(info.value), str(info.value)
    # The store is still usable, and the collective add failed on every rank.
    with pytest.raises(dds.UnknownVariableError):
        store.info("g")
    target = np.zeros((1, 3), np.float32)
    store.get("x", target, 0)
    assert store.device_path("x") == ("staged" if have else "host-only")


def test_fake_gpu_refused_with_gpu_off(comm, monkeypatch):
    monkeypatch.setenv("DDSTORE_GPU", "0")
    s = dds.PyDDStore(comm)
    try:
        s.add("x", np.ones((2, 3), np.float32))
        with pytest.raises(dds.GPUBufferError, match="GPU support is off"):
            s.get("x", FakeGPU(), 0)
        assert s.device_path("x") == "host-only"
    finally:
        s.free()


def test_library_classifies_host_memory():
    lib = _lib.load()
    kind, dev = ctypes.c_int32(-7), ctypes.c_int32(-7)
    for arr in (np.zeros(16), np.zeros((1000, 1000), np.uint8)):
        assert lib.dds_pointer_kind(address(arr), ctypes.byref(kind), ctypes.byref(dev)) == 0
        assert (kind.value, dev.value) == (_lib.DDS_MEM_HOST, -1)


def test_cpu_tensor_like_is_unsupported_dtype(store):
    class CpuTensor:
        dtype = "torch.float32"
    with pytest.raises(NotImplementedError, match="unsupported dtype: torch.float32"):
        store.get("x", CpuTensor(), 0)


def test_epoch_misuse(store, comm):
    with pytest.raises(dds.BadStateError, match="no epoch is open") as info:
        store.epoch_end()
    assert isinstance(info.value, RuntimeError)
    store.epoch_begin()
    with pytest.raises(RuntimeError, match="already open"):
        store.epoch_begin()
    store.epoch_end()
    store.epoch_begin()  # still usable
    store.epoch_end()


def test_join_on_a_core_store(store):
    with pytest.raises(RuntimeError, match="extra"):
        store.join("x")


def test_unregister_unknown_buffer(store):
    buf = np.empty((2, 3), np.float32)
    if store.method == 0:
        store.unregister_recv("x", buf)
    else:
        with pytest.raises(ValueError, match="buffer is not registered for 'x'"):
            store.unregister_recv("x", buf)


def test_register_recv_overlap(store):
    pool = np.zeros((8, 3), np.float32)
    store.register_recv("x", pool[:4])
    store.register_recv("x", pool[:0])  # zero bytes: ignored
    with pytest.raises(ValueError, match="overlaps"):
        store.register_recv("x", pool[2:6])
    store.unregister_recv("x", pool[:4])


def test_use_after_free(comm):
    store = make_store(comm, METHODS[0])
    store.add("x", np.zeros((1, 1), np.int32))
    store.free()
    for call in (lambda: store.get("x", np.empty((1, 1), np.int32), 0),
                 lambda: store.add("y", np.zeros((1, 1), np.int32)),
                 lambda: store.epoch_begin(),
                 lambda: store.info("x")):
        with pytest.raises(RuntimeError, match="freed"):
            call()


@pytest.mark.parametrize("method", METHODS)
def test_add_error_on_one_rank_only(comm, method):
    """A local error in a collective add fails the add on every rank."""
    store = make_store(comm, method)
    arr = np.zeros((2, 3), np.float16 if comm.rank == comm.size - 1 else np.float32)
    try:
        store.add("y", arr)
        ok = False
    except NotImplementedError:
        ok = comm.rank == comm.size - 1
    except ValueError as exc:
        ok = comm.rank != comm.size - 1 and f"rank {comm.size - 1}" in str(exc)
    store.add("y", np.zeros((2, 3), np.float32))  # the name is still free
    ok &= store.info("y") == (2 * comm.size, 3, 4)
    store.free()
    assert agree(comm, ok)


@pytest.mark.parametrize("method", METHODS)
def test_row_shape_differs_across_ranks(comm, method):
    store = make_store(comm, method)
    cols = 3 if comm.rank == 0 else 4
    if comm.size > 1:
        with pytest.raises(ValueError, match="elements"):
            store.add("y", np.zeros((2, cols), np.float32))
    store.free()


def test_constructor_errors(comm):
    with pytest.raises(ValueError, match="method=5"):
        dds.PyDDStore(comm, method=5)
    with pytest.raises(TypeError, match="method"):
        dds.PyDDStore(comm, method="0")
    with pytest.raises(TypeError, match="method"):
        dds.PyDDStore(comm, method=1.0)
    with pytest.raises(TypeError, match="n_core"):
        dds.PyDDStore(None, method=2, handshake_dir="/tmp", n_core="4")
    with pytest.raises(TypeError, match="handshake_dir"):
        dds.PyDDStore(comm, method=2, handshake_dir=3)
    with pytest.raises(ValueError, match="requires a valid MPI communicator"):
        dds.PyDDStore()
    with pytest.raises(ValueError, match="requires a valid MPI communicator"):
        dds.PyDDStore(None, method=1)
    with pytest.raises(ValueError, match="requires handshake_dir"):
        dds.PyDDStore(comm, method=2)
    with pytest.raises(ValueError, match="requires handshake_dir"):
        dds.PyDDStore(None, method=2, n_core=2)
    with pytest.raises(ValueError, match="n_core > 0"):
        dds.PyDDStore(None, method=2, handshake_dir="/tmp/x")
    with pytest.raises(TypeError, match="Comm"):
        dds.PyDDStore("world")
    with pytest.raises(TypeError, match="nic_map"):
        dds.PyDDStore(comm, method=1, nic_map=5)


def test_bad_width_fails_on_every_rank(comm):
    with pytest.raises(ValueError, match="width"):
        dds.PyDDStore(comm, ddstore_width=-1)


def test_unavailable_methods_raise_unsupported(comm):
    """Methods this build cannot serve raise UnsupportedError, which is a
    NotImplementedError and so also DDStore 3.0's RuntimeError."""
    for method in UNAVAILABLE:
        with pytest.raises(dds.UnsupportedError) as info:
            make_store(comm, method)
        assert isinstance(info.value, RuntimeError)
        assert str(method) in str(info.value)


def test_extra_member_constructor(comm):
    """PyDDStore(None, method=2, handshake_dir=D, n_core=N): created alone,
    or refused as unsupported by a build without method 2."""
    path = handshake_dir("-extra")
    try:
        store = dds.PyDDStore(None, method=2, handshake_dir=path, n_core=comm.size)
    except dds.UnsupportedError as exc:
        assert 2 not in METHODS and "extra" in str(exc)
        return
    with pytest.raises(RuntimeError):  # extra members read; they do not add
        store.add("x", np.zeros((1, 1), np.float32))
    store.free()


def test_library_not_found():
    # Not pytest's tmp_path: ranks sharing its base directory race on cleanup.
    with tempfile.TemporaryDirectory() as tmp:
        check_library_not_found(pathlib.Path(tmp))


def check_library_not_found(tmp_path):
    missing = str(tmp_path / "nowhere" / "libddstore.so")
    names = _lib.candidates({"DDSTORE_LIBRARY": missing})
    assert names == [missing]
    with pytest.raises(dds.LibraryNotFoundError, match="nowhere") as info:
        _lib.open_library(names)
    assert isinstance(info.value, OSError) and "DDSTORE_LIBRARY" in str(info.value)
    # Without the variable: the bundled copies, then the system names, all named.
    (tmp_path / "libddstore.so.0").write_bytes(b"not a library")
    names = _lib.candidates({}, package_dir=str(tmp_path), system_names=("libddstore-none.so.9",))
    assert names[0] == str(tmp_path / "libddstore.so.0") and names[-1] == "libddstore-none.so.9"
    with pytest.raises(OSError) as info:
        _lib.open_library(names)
    for name in names:
        assert name in str(info.value)
