"""Every documented exception: its type (pyddstore's class, DDStore 3.0's
builtin) and what its message names; and the bad-input matrix of
capi-tests/tests/test_errors.c through pyddstore (test_matrix_*), each group
followed by a read-back of every row."""

import os
import pathlib
import tempfile

import numpy as np
import pytest

import pyddstore as dds
from pyddstore import _errors, _lib
from pyddstore._buffers import pointer
from helpers import RankChecks, METHODS, UNAVAILABLE, agree, handshake_dir, make_store

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
        assert _lib.string(lib.dds_status_string(status)).startswith("DDS_ERR_")
        exc = _errors.error_for(status, "msg")
        assert isinstance(exc, dds.DDStoreError) and isinstance(exc, BUILTIN[status])
        assert exc.status == status and str(exc) == "msg"
    assert _lib.ffi.string(lib.dds_status_string(15)) == b"DDS_ERR_UNKNOWN_STATUS"
    assert isinstance(_errors.error_for(_errors.DDS_ERR_UNSUPPORTED, ""), RuntimeError)
    assert isinstance(_errors.error_for(_errors.DDS_ERR_TIMEOUT, ""), TimeoutError)
    odd = _errors.error_for(99, "boom")
    assert isinstance(odd, RuntimeError) and "99" in str(odd)


def test_generated_constants_match_the_header():
    # pyddstore/_constants.py (scripts/gen-bindings.py) against the header
    # cffi read: the same DDS_* names with the same values, and _errors
    # re-exports the statuses from it.
    from pyddstore import _constants
    ours = {n: getattr(_constants, n) for n in dir(_constants) if n.startswith("DDS_")}
    header = {n: getattr(_lib, n) for n in dir(_lib._DECLARED) if n.startswith("DDS_")}
    assert ours == header
    for status in range(0, 15):
        name = _lib.string(_lib.load().dds_status_string(status))
        assert getattr(_errors, name) == status


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
    n = _lib.ffi.new("int32_t *", 0)
    lib = _lib.load()
    if lib.dds_gpu_available(n) == 0:
        return True, n[0]
    return False, _lib.last_error(lib)


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
    kind, dev = _lib.ffi.new("int32_t *", -7), _lib.ffi.new("int32_t *", -7)
    for arr in (np.zeros(16), np.zeros((1000, 1000), np.uint8)):
        assert lib.dds_pointer_kind(pointer(arr), kind, dev) == 0
        assert (kind[0], dev[0]) == (_lib.DDS_MEM_HOST, -1)


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
    ck = RankChecks(comm)
    try:
        store.add("y", arr)
        ck(False, "add with a float16 array on the last rank did not raise")
    except NotImplementedError as exc:
        # Every rank raises the failing rank's kind (DDStore 3.0's
        # NotImplementedError), naming that rank (issue 35).
        ck(isinstance(exc, dds.UnsupportedDtypeError), f"raised {exc!r}, not UnsupportedDtypeError")
        ck(f"rank {comm.size - 1}" in str(exc), f"message {exc} lacks the failing rank")
    except ValueError as exc:
        ck(False, f"ValueError {exc!r} where rank {comm.size - 1}'s array was refused as unsupported")
    store.add("y", np.zeros((2, 3), np.float32))  # the name is still free
    ck(store.info("y") == (2 * comm.size, 3, 4), 'store.info("y") == (2 * comm.size, 3, 4)')
    store.free()
    ck.done()


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


# -- the bad-input matrix (capi-tests/tests/test_errors.c, through pyddstore) ---------
#
# Each case asserts the exception class and what its message names; after
# each group every row of "v" is read back, one by one and as one batch.
# Calls the Python API cannot express (NULL pointers, dangling handles,
# non-UTF-8 names, wrong byte counts) go through the library handle that
# pyddstore itself uses (cffi: NULL is ffi.NULL, a buffer is pointer(arr)),
# and their status becomes the same exceptions.

ROWS, ELEMS = 4, 4  # rows per rank, float64 items per row
RB = ELEMS * 8      # bytes per row


NULL = _lib.NULL


def int64s(idx):
    """An int64 ndarray as the `const int64_t *` a raw call takes."""
    return _lib.ffi.from_buffer("int64_t[]", idx)


def _value(g):
    return np.arange(ELEMS, dtype=np.float64) + 1000.0 * g


class Matrix:
    """A store with variable "v" and a tally of the cases checked."""

    def __init__(self, comm, method):
        self.comm, self.method = comm, method
        self.s = make_store(comm, method)
        self.lib = self.s._lib
        self.n = ROWS * comm.size
        first = ROWS * comm.rank
        self.s.add("v", np.stack([_value(first + i) for i in range(ROWS)]))
        self.cases = 0

    def h(self):
        return self.s._h

    def call(self, rc):
        """Raises what pyddstore raises for status `rc`."""
        if rc:
            raise _errors.error_for(rc, _lib.last_error(self.lib))

    def expect(self, cls, part, fn):
        with pytest.raises(cls) as info:
            fn()
        assert part in str(info.value), f"{part!r} not in {str(info.value)!r}"
        self.cases += 1
        return info.value

    def expect_ok(self, fn):
        fn()

    def intact(self):
        """Every row of "v" reads back intact, singly and as one batch."""
        out = np.empty((self.n, ELEMS), np.float64)
        idx = np.arange(self.n - 1, -1, -1, dtype=np.int64)
        self.s.get_batch("v", out, idx)
        want = np.stack([_value(g) for g in idx])
        ck = RankChecks(self.comm)
        ck(np.array_equal(out, want), 'np.array_equal(out, want)')
        row = np.empty((1, ELEMS), np.float64)
        for g in range(self.n):
            self.s.get("v", row, g)
            ck(np.array_equal(row[0], _value(g)), 'np.array_equal(row[0], _value(g))')
        ck.done("a row changed or could not be read after the bad inputs")


@pytest.fixture(params=METHODS)
def matrix(request, comm):
    m = Matrix(comm, request.param)
    yield m
    comm.Barrier()
    m.s.free()


def _options(lib, **fields):
    o = _lib.ffi.new("dds_options *")
    assert lib.dds_options_init(o) == 0
    for k, v in fields.items():
        setattr(o, k, v)
    return o


def _create(m, opts, out=True):
    h = _lib.ffi.new("dds_store **")
    rc = m.lib.dds_create(m.comm.py2f(), opts if opts is not None else NULL, h if out else NULL)
    if rc == 0:
        m.lib.dds_destroy(h[0])
    m.call(rc)


def test_matrix_create(matrix, comm):
    m, last = matrix, comm.size - 1
    m.expect(dds.InvalidArgumentError, "method=5", lambda: dds.PyDDStore(comm, method=5))
    m.expect(dds.InvalidArgumentError, "width -1", lambda: dds.PyDDStore(comm, ddstore_width=-1))
    m.expect(dds.InvalidArgumentError, "method 7", lambda: _create(m, _options(m.lib, method=7)))
    m.expect(dds.InvalidArgumentError, "role 5", lambda: _create(m, _options(m.lib, role=5)))
    m.expect(dds.InvalidArgumentError, "struct_size", lambda: _create(m, _options(m.lib, struct_size=0)))
    m.expect(dds.InvalidArgumentError, "out", lambda: _create(m, _options(m.lib), out=False))
    m.expect(dds.InvalidArgumentError, f"rank {last}: method 9",
             lambda: _create(m, _options(m.lib, method=9 if comm.rank == last else 0)))
    os.environ["DDSTORE_ALLTOALL_MAX_BYTES"] = "lots"
    try:
        m.expect(dds.InvalidArgumentError, 'DDSTORE_ALLTOALL_MAX_BYTES="lots"',
                 lambda: dds.PyDDStore(comm, method=m.method, handshake_dir=handshake_dir()))
    finally:
        del os.environ["DDSTORE_ALLTOALL_MAX_BYTES"]
    if 2 in METHODS:
        # A hand-shake directory others may write, refused on every core rank.
        open_dir = handshake_dir("-open")
        if comm.rank == 0:
            os.chmod(open_dir, 0o777)
        comm.Barrier()
        m.expect(dds.HandshakeIOError, "may be written by other users",
                 lambda: dds.PyDDStore(comm, method=2, handshake_dir=open_dir))
    m.intact()
    assert m.cases >= 8


def test_matrix_handles(matrix, comm):
    m, lib = matrix, matrix.lib
    row = np.empty((1, ELEMS), np.float64)
    bogus = _lib.ffi.cast("dds_store *", 0x12345670)
    m.expect(dds.BadStateError, "not a live store",
             lambda: m.call(lib.dds_get(bogus, b"v", pointer(row), RB, 0, 1)))
    m.expect(dds.InvalidArgumentError, "store handle is NULL",
             lambda: m.call(lib.dds_get(NULL, b"v", pointer(row), RB, 0, 1)))
    m.expect(dds.BadStateError, "not a live store", lambda: m.call(lib.dds_epoch_begin(bogus)))
    m.expect(dds.BadStateError, "not a live store", lambda: m.call(lib.dds_destroy(bogus)))
    # Use after destroy, and destroy twice.
    other = make_store(comm, m.method)
    other.add("v", np.zeros((1, ELEMS)))
    h = other._h
    other.free()
    m.expect(dds.BadStateError, "freed", lambda: other.get("v", row, 0))
    m.expect(dds.BadStateError, "not a live store",
             lambda: m.call(lib.dds_get(h, b"v", pointer(row), RB, 0, 1)))
    m.expect(dds.BadStateError, "not a live store",
             lambda: m.call(lib.dds_update(h, b"v", pointer(row), RB, 0)))
    m.expect(dds.BadStateError, "destroyed twice", lambda: m.call(lib.dds_destroy(h)))
    other.free()  # idempotent in Python
    m.intact()


def test_matrix_register(matrix, comm):
    m, lib, s, last = matrix, matrix.lib, matrix.s, comm.size - 1
    buf = np.zeros((ROWS, ELEMS), np.float64)
    m.expect(dds.InvalidArgumentError, "name is NULL", lambda: m.call(lib.dds_init(m.h(), NULL, 4, 4, 8)))
    m.expect(dds.InvalidArgumentError, "empty", lambda: s.init("", 4, 4, 8))
    m.expect(dds.InvalidArgumentError, "longer than 255", lambda: s.init("x" * 300, 4, 4, 8))
    m.expect(dds.InvalidArgumentError, "UTF-8", lambda: m.call(lib.dds_init(m.h(), b"bad\xff\xfe", 4, 4, 8)))
    m.expect(dds.InvalidArgumentError, "row count -1 is negative", lambda: s.init("w", -1, 4, 8))
    m.expect(dds.InvalidArgumentError, "elements per row must be positive", lambda: s.init("w", 4, 0, 8))
    m.expect(dds.InvalidArgumentError, "got -3", lambda: s.init("w", 4, -3, 8))
    m.expect(dds.InvalidArgumentError, "item size 3", lambda: s.init("w", 4, 4, 3))
    m.expect(dds.InvalidArgumentError, "item size 16", lambda: s.init("w", 4, 4, 16))
    m.expect(dds.InvalidArgumentError, "overflows", lambda: s.init("w", 2**62, 8, 8))
    m.expect(dds.InvalidArgumentError, "overflows 64 bits", lambda: s.init("w", 1, 2**63 - 1, 8))
    m.expect(dds.DuplicateVariableError, "'v' already exists", lambda: s.init("v", 4, 4, 8))
    m.expect(dds.MismatchError, "data_bytes is 120",
             lambda: m.call(lib.dds_add(m.h(), b"w", pointer(buf), buf.nbytes - 8, 4, 4, 8)))
    m.expect(dds.InvalidArgumentError, "data is NULL",
             lambda: m.call(lib.dds_add(m.h(), b"w", NULL, buf.nbytes, 4, 4, 8)))
    m.expect(dds.InvalidArgumentError, f"rank {last}: variable 'w': item size 5",
             lambda: s.init("w", 4, 4, 5 if comm.rank == last else 8))
    if comm.size > 1:
        m.expect(dds.MismatchError, "rank 1 has rows of 3 elements",
                 lambda: s.init("w", 4, 3 if comm.rank == 1 else 2, 8))
        m.expect(dds.InvalidArgumentError, "different variable names",
                 lambda: s.init("w0" if comm.rank == 0 else "w1", 4, 2, 8))
    m.expect(dds.ArgumentTypeError, "name must be a str", lambda: s.init(b"w", 4, 4, 8))
    # The failed registrations left nothing behind: "w" is still free.
    s.init("w", 1, 1, 1)
    m.intact()


def test_matrix_read(matrix, comm):
    m, lib, s, n = matrix, matrix.lib, matrix.s, matrix.n
    row = np.empty((1, ELEMS), np.float64)
    two = np.empty((2, ELEMS), np.float64)
    m.expect(dds.UnknownVariableError, "'nope'", lambda: s.get("nope", row, 0))
    m.expect(dds.IndexOutOfRangeError, "global row -1 is out of range", lambda: s.get("v", row, -1))
    m.expect(dds.IndexOutOfRangeError, f"global row {n} is out of range [0, {n})", lambda: s.get("v", row, n))
    m.expect(dds.IndexOutOfRangeError, "out of range", lambda: s.get("v", row, 2**63 - 1))
    m.expect(dds.MismatchError, "destination of 31 bytes",
             lambda: m.call(lib.dds_get(m.h(), b"v", pointer(row), RB - 1, 0, 1)))
    m.expect(dds.MismatchError, "need 32 bytes",
             lambda: m.call(lib.dds_get(m.h(), b"v", pointer(two), RB + 8, 0, 1)))
    m.expect(dds.MismatchError, "8 bytes", lambda: s.get("v", np.empty((1, 1), np.float64), 0))
    if comm.size > 1:
        m.expect(dds.InvalidArgumentError, "cross the end of rank 0's shard", lambda: s.get("v", two, 3))
    m.expect(dds.InvalidArgumentError, "count -2 is negative",
             lambda: m.call(lib.dds_get(m.h(), b"v", pointer(row), RB, 0, -2)))
    m.expect(dds.InvalidArgumentError, "dst is NULL", lambda: m.call(lib.dds_get(m.h(), b"v", NULL, RB, 0, 1)))
    m.expect(dds.InvalidArgumentError, "name is NULL",
             lambda: m.call(lib.dds_get(m.h(), NULL, pointer(row), RB, 0, 1)))
    m.expect(dds.MismatchError, "Invalid data type", lambda: s.get("v", np.empty((1, ELEMS), np.float32), 0))
    # Updates are local and bounds-checked.
    m.expect(dds.IndexOutOfRangeError, "rows [3, 5) of 'v' are outside", lambda: s.update("v", two, 3))
    m.expect(dds.IndexOutOfRangeError, "outside this rank's shard of 4 rows", lambda: s.update("v", row, -1))
    m.expect(dds.MismatchError, "not a whole number of 32-byte rows",
             lambda: m.call(lib.dds_update(m.h(), b"v", pointer(row), RB - 4, 0)))
    m.expect(dds.UnknownVariableError, "'nope'", lambda: s.update("nope", row, 0))
    m.expect(dds.InvalidArgumentError, "data is NULL", lambda: m.call(lib.dds_update(m.h(), b"v", NULL, RB, 0)))
    m.intact()


def test_matrix_batch(matrix, comm):
    m, lib, s, n, last = matrix, matrix.lib, matrix.s, matrix.n, comm.size - 1
    two = np.empty((2, ELEMS), np.float64)
    idx = np.array([0, n - 1], np.int64)
    bad = np.array([0, n + 5 if comm.rank == last else 1], np.int64)
    if m.method == 0:
        # Collective: an index out of range on the last rank fails every rank.
        m.expect(dds.IndexOutOfRangeError, f"rank {last}: index 1 of its batch, global row {n + 5}, is out of range",
                 lambda: s.get_batch("v", two, bad))
    elif comm.rank == last:
        m.expect(dds.IndexOutOfRangeError, f"index 1 of the batch, global row {n + 5}, is out of range",
                 lambda: s.get_batch("v", two, bad))
    else:
        s.get_batch("v", two, bad)
        assert np.array_equal(two, np.stack([_value(g) for g in bad]))
    m.expect(dds.IndexOutOfRangeError, "global row -1", lambda: s.get_batch("v", two[:1], [-1]))
    # A destination of the wrong size on rank 0 only.
    size = RB if comm.rank == 0 else 2 * RB
    if m.method == 0:
        m.expect(dds.MismatchError, "rank 0: destination of 32 bytes",
                 lambda: m.call(lib.dds_get_batch(m.h(), b"v", pointer(two), size, int64s(idx), 2)))
    elif comm.rank == 0:
        m.expect(dds.MismatchError, "destination of 32 bytes",
                 lambda: m.call(lib.dds_get_batch(m.h(), b"v", pointer(two), size, int64s(idx), 2)))
    m.expect(dds.MismatchError, "need 64 bytes",
             lambda: m.call(lib.dds_get_batch(m.h(), b"v", pointer(two), 2 * RB + 8, int64s(idx), 2)))
    m.expect(dds.UnknownVariableError, "'nope'", lambda: s.get_batch("nope", two, idx))
    m.expect(dds.InvalidArgumentError, "n -1 is negative",
             lambda: m.call(lib.dds_get_batch(m.h(), b"v", pointer(two), 2 * RB, int64s(idx), -1)))
    m.expect(dds.InvalidArgumentError, "indices is NULL",
             lambda: m.call(lib.dds_get_batch(m.h(), b"v", pointer(two), 2 * RB, NULL, 2)))
    m.expect(dds.InvalidArgumentError, "dst is NULL",
             lambda: m.call(lib.dds_get_batch(m.h(), b"v", NULL, 2 * RB, int64s(idx), 2)))
    m.expect(dds.InvalidArgumentError, "indices must be one-dimensional",
             lambda: s.get_batch("v", two, idx.reshape(2, 1)))
    m.expect(dds.InvalidArgumentError, "arr has 2 rows but 1 indices", lambda: s.get_batch("v", two, [0]))
    m.intact()


def test_matrix_state(matrix, comm):
    m, lib, s = matrix, matrix.lib, matrix.s
    buf = np.zeros((4, ELEMS), np.float64)
    m.expect(dds.BadStateError, "no epoch is open", s.epoch_end)
    s.epoch_begin()
    m.expect(dds.BadStateError, "already open", s.epoch_begin)
    s.epoch_end()
    m.expect(dds.BadStateError, "only valid for method-2 extra members", lambda: s.join("v"))
    m.expect(dds.InvalidArgumentError, "buf is NULL", lambda: m.call(lib.dds_register_recv(m.h(), b"v", NULL, 64)))
    m.expect(dds.UnknownVariableError, "'nope'", lambda: s.register_recv("nope", buf[:2]))
    s.register_recv("v", buf[:2])
    m.expect(dds.InvalidArgumentError, "overlaps", lambda: s.register_recv("v", buf[1:3]))
    m.expect(dds.InvalidArgumentError, "is not registered for 'v'",
             lambda: m.call(lib.dds_unregister_recv(m.h(), b"v", pointer(buf[1:]))))
    s.unregister_recv("v", buf[:2])
    info = _lib.ffi.new("dds_var_info *")
    m.expect(dds.InvalidArgumentError, "dds_var_info.struct_size is 0",
             lambda: m.call(lib.dds_info(m.h(), b"v", info)))
    m.expect(dds.InvalidArgumentError, "out is NULL", lambda: m.call(lib.dds_info(m.h(), b"v", NULL)))
    counters = _lib.ffi.new("dds_counters *")
    m.expect(dds.InvalidArgumentError, "dds_counters.struct_size",
             lambda: m.call(lib.dds_profile(m.h(), b"v", counters)))
    # Messages name the function.
    err = m.expect(dds.UnknownVariableError, "'nope'", lambda: s.get("nope", buf[:1], 0))
    s._vars.pop("nope", None)
    assert str(err).startswith("dds_info: ") or str(err).startswith("dds_get: ")
    m.intact()


def test_handle_of_the_wrong_kind_is_refused(comm):
    """A request handle passed as a store, or a store as a request, is
    refused naming the kind expected, and neither object is acted on
    (issue 35)."""
    s = make_store(comm, 0)
    s.add("v", np.arange(4 * comm.size, dtype=np.float64).reshape(-1, 1)[4 * comm.rank:4 * comm.rank + 4])
    out = np.zeros((2, 1), np.float64)
    req = s.get_batch_async("v", out, np.array([0, 1], np.int64))
    lib, ffi = s._lib, _lib.ffi
    as_store = ffi.cast("dds_store *", req._req)
    as_req = ffi.cast("dds_request *", s._h)
    assert int(ffi.cast("uintptr_t", as_store)) != int(ffi.cast("uintptr_t", s._h))
    info = ffi.new("dds_var_info *")
    info.struct_size = ffi.sizeof("dds_var_info")
    ck = RankChecks(comm)
    for call, what in ((lambda: lib.dds_info(as_store, b"v", info), "not a store handle (dds_store *)"),
                       (lambda: lib.dds_destroy(as_store), "not a store handle (dds_store *)"),
                       (lambda: lib.dds_request_wait(as_req), "not a request handle (dds_request *)")):
        rc = call()
        msg = _lib.last_error(lib)
        ck(rc == _errors.DDS_ERR_INVALID_ARGUMENT and what in msg, f"{rc} {msg!r}; expected {what!r}")
    req.wait()
    ck(list(out[:, 0]) == [0.0, 1.0], f"read {out[:, 0]}")
    ck(s.info("v")[0] == 4 * comm.size, "the store is still there")
    s.free()
    ck.done()


def test_mismatched_collective_calls_fail_on_every_rank(comm):
    """Method 0, collective mode: get_batch on rank 0 against get_batch_async
    on the others fails on every rank naming both calls, and the store
    stays usable (issue 35; the C table is test_collective_mismatch)."""
    if comm.size < 2:
        pytest.skip("needs two ranks")
    s = make_store(comm, 0, batch_mode="collective")
    s.add("v", np.zeros((2, 1), np.float64))
    out = np.zeros((1, 1), np.float64)
    idx = np.array([0], np.int64)
    ck = RankChecks(comm)
    try:
        if comm.rank == 0:
            s.get_batch("v", out, idx)
        else:
            s.get_batch_async("v", out, idx).wait()
        ck(False, "no error")
    except dds.InvalidArgumentError as exc:
        others = "rank 1" if comm.size == 2 else f"ranks 1-{comm.size - 1}"
        ck(f"collective call mismatch: rank 0 is in dds_get_batch('v'), {others} in dds_get_batch_start('v')"
           in str(exc), str(exc))
    s.get_batch("v", out, idx)
    s.free()
    ck.done()
