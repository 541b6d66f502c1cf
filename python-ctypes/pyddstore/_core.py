"""PyDDStore: DDStore 3.0's Python store, over libddstore's C API.

This module does not import mpi4py: a communicator is used only through its
``py2f()`` (the Fortran handle the C API takes). mpi4py is imported only for a
method-2 extra member, which has no communicator of its own.
"""

import os
import time
from collections import namedtuple

import numpy as np

from . import _args, _finalize, _lib, _ragged, _requests
from ._args import I32
from ._buffers import HOST_DTYPES, address, device_pointer, extract, stream_of
from ._errors import (
    ArgumentTypeError, BadStateError, GPUBufferError,
    InvalidArgumentError, MismatchError, error_for, collective_message, collective_status,
)

# What a store remembers about a variable: they never change once registered.
# `dtypes`: the host dtypes whose items are `itemsize` bytes, the destinations
# the read paths' shortcut accepts with one set lookup.
_Var = namedtuple("_Var", "cname total_rows disp itemsize dtypes")

_perf = time.perf_counter
try:  # the compiled get (pyddstore/_fastcall.c), built where a C compiler was found
    from ._fastcall import Getter as _Getter
except ImportError:
    _Getter = None
_ndarray = np.ndarray
_INT64 = np.dtype(np.int64)
_ffi = _lib.ffi
_NULL = _lib.NULL
_from_buffer = _ffi.from_buffer
_I64_ARRAY = _ffi.typeof("int64_t[]")
_CHARS = _ffi.typeof("char[]")  # from_buffer(_CHARS, arr, True): writable, positional (cheaper than keywords)
# dds_var_info.device_path codes (the header's DDS_PATH_*) -> the names of device_path().
_DEVICE_PATHS = {getattr(_lib, "DDS_PATH_" + n.upper().replace("-", "_")): n
                 for n in ("host-only", "staged", "gpudirect", "refused")}


class PyDDstoreVarinfo:
    """Kept only so that ``from pyddstore import PyDDstoreVarinfo`` works, as
    with DDStore 3.0 (where it has no usable attributes). Use
    :meth:`PyDDStore.info` instead."""


_as_int = _args.to_int  # (value, what, bounds=int64): checked against the C type
_cname = _args.cname
_row = _args.row


# dds_settings.batch_mode and dds_counters.batch_mode, as Python names them.
_BATCH_MODES = {_lib.DDS_BATCH_COLLECTIVE: "collective", _lib.DDS_BATCH_ONESIDED: "onesided",
                _lib.DDS_BATCH_AUTO: "auto"}


def read_settings(lib, handle):
    """dds_store_settings as a dict; `handle` NULL: what a store created now
    with default options would use (raises what dds_create would for a
    malformed environment variable)."""
    out = _ffi.new("dds_settings *")
    out.struct_size = _ffi.sizeof("dds_settings")
    rc = lib.dds_store_settings(handle, out)
    if rc:
        raise error_for(rc, _lib.last_error(lib))
    return {
        "method": out.method,
        "role": "extra" if out.role == _lib.DDS_ROLE_EXTRA else "core",
        "batch_mode": _BATCH_MODES.get(out.batch_mode, "collective"),
        "gpu": {_lib.DDS_GPU_OFF: "off", _lib.DDS_GPU_AUTO: "auto", _lib.DDS_GPU_REQUIRE: "require"}[out.gpu],
        "gpu_staging": bool(out.gpu_staging),
        "profiling": bool(out.profiling),
        "node_local": bool(out.node_local),
        "mpi_progress": bool(out.mpi_progress),
        "handshake_dir": os.fsdecode(_ffi.string(out.handshake_dir)),
    }


def settings():
    """What a store created now with default options would use, as the
    library reads the environment: method, role, batch_mode, gpu,
    gpu_staging, profiling, node_local, mpi_progress, handshake_dir."""
    return read_settings(_lib.load(), _NULL)


def _comm_self_f():
    # An extra member has no communicator; the C API still takes one, and
    # MPI must be running for it, so use COMM_SELF (importing mpi4py starts MPI).
    from mpi4py import MPI
    return MPI.COMM_SELF.py2f()


class PyDDStore:
    """A distributed store of named 2-D variables (see docs/python.md).

    PyDDStore(comm_or_none=None, method=0, handshake_dir="", n_core=0,
              nic_map=None, *, ddstore_width=0, batch_mode=None)

    ``batch_mode`` (method 0): ``"collective"`` (DDStore 3.0: every rank calls
    get_batch the same number of times, from one thread) or ``"onesided"``
    (no matching calls, thread-safe) or ``"auto"`` (called as collective; each
    variable runs in the mode its first batches found faster, see
    docs/tuning.md); None reads DDSTORE_BATCH_MODE (default collective). The
    same on every rank.
    """

    def __init__(self, comm_or_none=None, method=0, handshake_dir="", n_core=0,
                 nic_map=None, *, ddstore_width=0, batch_mode=None):
        self._h = None  # first, so __del__ works whatever fails below
        # get()'s compiled path, a _fastcall.Getter's get: while the store
        # lives, unprofiled and the module built; else None.
        self._fast = None
        self._vars = {}
        self._recv = {}  # (name, address) -> caller's buffer, kept alive
        self._ragged = {}  # ragged variable name -> (dtype, row shape) given to add_ragged
        method = _as_int(method, "method", I32)
        n_core = _as_int(n_core, "n_core", I32)
        width = 0 if ddstore_width is None else _as_int(ddstore_width, "ddstore_width", I32)
        if handshake_dir is None:
            handshake_dir = ""
        if not isinstance(handshake_dir, (str, os.PathLike)):
            raise ArgumentTypeError(f"handshake_dir must be a str, got {type(handshake_dir).__name__}")
        handshake_dir = os.fspath(handshake_dir)
        if nic_map is not None and not isinstance(nic_map, str):
            raise ArgumentTypeError(f"nic_map must be a str or None, got {type(nic_map).__name__}")
        if method not in (0, 1, 2):
            raise InvalidArgumentError(f"method={method} is not 0 (MPI), 1 (libfabric) or 2 (split jobs)")
        modes = {"collective": _lib.DDS_BATCH_COLLECTIVE, "onesided": _lib.DDS_BATCH_ONESIDED,
                 "one-sided": _lib.DDS_BATCH_ONESIDED, "auto": _lib.DDS_BATCH_AUTO}
        if batch_mode is None:
            mode_code = _lib.DDS_BATCH_ENV  # DDSTORE_BATCH_MODE, read by the library
        elif isinstance(batch_mode, str) and batch_mode.strip().lower() in modes:
            mode_code = modes[batch_mode.strip().lower()]
        elif isinstance(batch_mode, str):
            raise InvalidArgumentError(f"batch_mode={batch_mode!r} is not 'collective', 'onesided' or 'auto'")
        else:
            raise ArgumentTypeError(f"batch_mode must be a str or None, got {type(batch_mode).__name__}")

        role = _lib.DDS_ROLE_CORE
        if method == 2 and not handshake_dir:
            raise InvalidArgumentError("method=2 requires handshake_dir (a directory shared with the other job)")
        if comm_or_none is None:
            if method != 2:
                raise InvalidArgumentError(f"method={method} requires a valid MPI communicator (got None)")
            if n_core <= 0:
                raise InvalidArgumentError(
                    f"method=2 extra member requires n_core > 0 (the core job's rank count), got {n_core}")
            role = _lib.DDS_ROLE_EXTRA
            comm_f = _comm_self_f()
        else:
            py2f = getattr(comm_or_none, "py2f", None)
            if not callable(py2f):
                raise ArgumentTypeError(
                    f"comm_or_none must be an mpi4py.MPI.Comm or None, got {type(comm_or_none).__name__}")
            comm_f = py2f()

        self._method = method
        self._role = role
        self._py_gets = 0
        self._py_get = 0.0
        self._py_sync = 0.0

        lib = self._lib = _lib.load()
        self._mpi_finalized = lib.MPI_Finalized
        _finalize.guard(lib)
        # Bound once: a read then costs one attribute lookup, not three.
        self._c_get = lib.dds_get
        self._c_get_batch = lib.dds_get_batch
        self._c_get_stream = lib.dds_get_stream
        self._c_get_batch_stream = lib.dds_get_batch_stream

        opts = _ffi.new("dds_options *")
        self._check(lib.dds_options_init(opts))
        opts.method, opts.role, opts.width, opts.n_core = method, role, width, n_core
        opts.batch_mode = mode_code
        # dds_create copies the strings; these locals keep them alive until then.
        hs = _ffi.new("char[]", _args.cstring(handshake_dir, "handshake_dir")) if handshake_dir else _NULL
        nm = _ffi.new("char[]", _args.cstring(nic_map, "nic_map")) if nic_map else _NULL
        opts.handshake_dir, opts.nic_map = hs, nm
        handle = _ffi.new("dds_store **")
        self._check(lib.dds_create(comm_f, opts, handle))
        self._h = handle[0]  # a cdata `dds_store *`
        # What the library resolved from the options and the environment.
        self._settings = read_settings(lib, self._h)
        self._onesided = self._settings["batch_mode"] == "onesided"
        self._prof = self._settings["profiling"]
        if _Getter is not None and not self._prof:
            self._fast = _Getter(int(_ffi.cast("uintptr_t", lib.dds_get)), int(_ffi.cast("uintptr_t", self._h)),
                                 self._vars, _ndarray, _Var._fields.index("cname"),
                                 _Var._fields.index("dtypes")).get
        # A store with GPU support off takes every pointer as host memory, so
        # device buffers must be stopped here.
        self._gpu_off = self._settings["gpu"] == "off"

    # -- plumbing ------------------------------------------------------------

    def _check(self, rc):
        if rc:
            raise error_for(rc, _lib.last_error(self._lib))

    def _handle(self):
        """The C handle of a live store: BadStateError once freed or once MPI is
        finalized (so a call answered from Python's caches cannot succeed then)."""
        h = self._h
        if h is None:
            raise BadStateError("this PyDDStore has been freed")
        flag = _ffi.new("int *")  # per call: reads may run on several threads
        if self._mpi_finalized(flag) == 0 and flag[0]:
            raise BadStateError("MPI has been finalized: this PyDDStore can only be freed")
        return h

    def _var(self, name):
        """Cached description of `name`; UnknownVariableError (IndexError) if absent."""
        var = self._vars.get(name) if type(name) is str else None
        if var is None:
            cname = _cname(name)
            info = self._info(cname)
            dtypes = frozenset(d for d in HOST_DTYPES if d.itemsize == info.item_size)
            var = _Var(cname, info.total_rows, info.row_elems, info.item_size, dtypes)
            self._vars[name] = var
        return var

    def _info(self, cname):
        info = _ffi.new("dds_var_info *")
        info.struct_size = _ffi.sizeof("dds_var_info")
        self._check(self._lib.dds_info(self._handle(), cname, info))
        return info

    def _collective(self):
        # Method 0's get_batch is collective unless its batch mode is one-sided
        # (add and init are collective for every method).
        return not self._onesided

    def _fail_collective(self, call, name, exc):
        """Takes part in collective `call` (_lib.DDS_CALL_*) as a failing rank,
        after `exc` was raised here before the C call: every rank then fails
        with this rank's status and message (the lowest failing rank's, when
        several fail), instead of the others waiting in the collective.
        Raises that agreed error here too, so every rank raises the same
        class with the same message."""
        h = self._h
        if h is None:
            return
        status = collective_status(exc)
        message = collective_message(exc).encode("utf-8", "replace").replace(b"\0", b"?")
        cname = _args.safe_cname(name)
        rc = self._lib.dds_fail_collective(h, call, _NULL if cname is None else cname, status, message)
        if rc:
            # What every rank raises: the lowest failing rank's class and message.
            raise error_for(rc, _lib.last_error(self._lib)) from exc

    def _itemsize_check(self, var, name, itemsize):
        if itemsize != var.itemsize:
            raise MismatchError(
                f"Invalid data type: buffer items are {itemsize} bytes but variable "
                f"'{name}' holds {var.itemsize}-byte items")

    def _device(self, arr, ptr, nbytes, name, role):
        """For a buffer that presents itself as device memory: the stream to
        order a read on (NULL: the library's synchronous default). Raises
        GPUBufferError unless the library itself reports device memory, so a
        device pointer never reaches host code."""
        if nbytes == 0:
            return _NULL  # nothing is read or written
        if self._gpu_off:
            raise GPUBufferError(
                f"GPU {role} buffer for '{name}': GPU support is off for this store "
                f"(DDSTORE_GPU or its gpu option when it was created)")
        kind, dev = _ffi.new("int32_t *", -1), _ffi.new("int32_t *", -1)
        self._check(self._lib.dds_pointer_kind(ptr, kind, dev))
        if kind[0] == _lib.DDS_MEM_CUDA:
            stream = stream_of(arr)
            return _NULL if stream is None else device_pointer(stream)
        n = _ffi.new("int32_t *", 0)
        if self._lib.dds_gpu_available(n) != 0:
            why = _lib.last_error(self._lib)
            raise GPUBufferError(
                f"GPU {role} buffer for '{name}': libddstore cannot reach device memory here "
                f"({why}); copy through host memory (e.g. tensor.cpu().numpy())")
        what = "ROCm memory, which this build does not copy" if kind[0] == _lib.DDS_MEM_ROCM else \
            f"not CUDA device memory (address {address(ptr):#x})"
        raise GPUBufferError(f"GPU {role} buffer for '{name}': the CUDA driver says it is {what}")

    # -- registration (collective) --------------------------------------------

    def add(self, name, arr):
        """Registers `name` from `arr` (rows = arr.shape[0]); the data is copied."""
        h = self._handle()
        try:
            cname = _cname(name)
            ptr, nbytes, itemsize, rows, row_elems, gpu = extract(arr, "arr")
            if gpu:
                self._device(arr, ptr, nbytes, name, "source")
        except Exception as exc:
            self._fail_collective(_lib.DDS_CALL_ADD, name, exc)
            raise
        self._check(self._lib.dds_add(h, cname, ptr, nbytes, rows, row_elems, itemsize))

    def init(self, name, nrows, disp, itemsize=1):
        """Registers `name` with `nrows` zero-filled local rows of `disp` items of `itemsize` bytes."""
        h = self._handle()
        try:
            cname = _cname(name)
            nrows = _as_int(nrows, "nrows")
            disp = _as_int(disp, "disp")
            itemsize = _as_int(itemsize, "itemsize", I32)
        except Exception as exc:
            self._fail_collective(_lib.DDS_CALL_ADD, name, exc)
            raise
        self._check(self._lib.dds_init(h, cname, nrows, disp, itemsize))

    # -- snapshots (collective; docs/snapshots.md) ----------------------------

    def save(self, dir, names=None):
        """Saves the variables `names` (None: every variable) to snapshot
        directory `dir`, atomically replacing an older snapshot there.
        Collective; errors are raised on every rank alike."""
        self._snapshot(self._lib.dds_save, _lib.DDS_CALL_SAVE, dir, names)

    def load(self, dir, names=None):
        """Loads the variables `names` (None: every variable of the snapshot)
        from `dir`, saved on any number of ranks and re-sharded evenly over
        this store's ranks (the first ranks hold one more row when the rows
        do not divide evenly). Collective; on an error nothing is loaded."""
        self._snapshot(self._lib.dds_load, _lib.DDS_CALL_LOAD, dir, names)

    def _snapshot(self, fn, call, dir, names):
        h = self._handle()
        try:
            cdir = os.fsencode(os.fspath(dir))
            if not cdir or b"\0" in cdir:
                raise InvalidArgumentError(f"snapshot directory {dir!r} is empty or holds a NUL character")
            if isinstance(names, str):
                names = [names]
            cnames = [_ffi.new("char[]", _cname(n)) for n in (names or ())]
            arr = _ffi.new("char *[]", cnames) if cnames else _NULL
        except Exception as exc:
            self._fail_collective(call, None, exc)
            raise
        self._check(fn(h, cdir, arr, len(cnames)))

    def join(self, name):
        """Method-2 extra member: attaches to `name` published by the core job."""
        self._check(self._lib.dds_join(self._handle(), _cname(name)))
        self._var(name)

    def extra_done(self):
        """Method-2 extra member: announces that this process has finished
        reading, so the core job's `wait_extras` can count it."""
        self._check(self._lib.dds_extra_done(self._handle()))

    def wait_extras(self, n_extras, timeout_ms=-1):
        """Method-2 core (collective): waits until `n_extras` extra processes
        have called `extra_done`, at most `timeout_ms` milliseconds (negative:
        DDSTORE_HANDSHAKE_TIMEOUT_S); raises a TimeoutError subclass otherwise."""
        h = self._handle()
        try:
            n_extras = _as_int(n_extras, "n_extras")
            timeout_ms = _as_int(timeout_ms, "timeout_ms")
        except Exception as exc:
            self._fail_collective(_lib.DDS_CALL_WAIT_EXTRAS, None, exc)
            raise
        self._check(self._lib.dds_wait_extras(h, n_extras, timeout_ms))

    # -- blobs (method 2) --------------------------------------------------------

    def publish_blob(self, name, data):
        """Method 2 (core or extra member; local): publishes the bytes of
        `data` (any contiguous buffer, at most ``DDS_BLOB_MAX_BYTES``) as blob
        `name` in the hand-shake directory, replacing an older one."""
        h = self._handle()
        cname = _cname(name)
        try:
            view = memoryview(data)
        except TypeError:
            raise ArgumentTypeError(f"data must be bytes or a buffer, got {type(data).__name__}") from None
        if not view.contiguous:
            raise InvalidArgumentError(f"blob '{name}': data must be a contiguous buffer")
        nbytes = view.nbytes
        ptr = _from_buffer(_CHARS, view.cast("B")) if nbytes else _NULL
        self._check(self._lib.dds_publish_blob(h, cname, ptr, nbytes))

    def wait_blob(self, name, timeout_ms=-1):
        """Method 2 (core or extra member; local): waits for blob `name` in
        the hand-shake directory, at most `timeout_ms` milliseconds
        (negative: DDSTORE_HANDSHAKE_TIMEOUT_S), and returns its bytes;
        raises a TimeoutError subclass on time-out, an IOError subclass for
        a corrupt file or one this user may not trust."""
        h = self._handle()
        cname = _cname(name)
        timeout_ms = _as_int(timeout_ms, "timeout_ms")
        length = _ffi.new("size_t *")
        cap = 4096
        while True:
            buf = _ffi.new("char[]", cap)
            rc = self._lib.dds_wait_blob(h, cname, buf, cap, length, timeout_ms)
            if rc == 0:
                return _ffi.buffer(buf, length[0])[:]
            # Too small (the blob may have been replaced by a bigger one
            # since): the length needed is known, and the blob is there.
            if rc == _lib.DDS_ERR_INVALID_ARGUMENT and length[0] > cap:
                cap = length[0]
                continue
            self._check(rc)

    # -- local writes ----------------------------------------------------------

    def update(self, name, arr, offset):
        """Copies the rows of `arr` into this rank's shard from local row `offset`."""
        h = self._handle()
        var = self._var(name)
        ptr, nbytes, itemsize, _, _, gpu = extract(arr, "arr")
        if gpu:
            self._device(arr, ptr, nbytes, name, "source")
        self._itemsize_check(var, name, itemsize)
        self._check(self._lib.dds_update(h, var.cname, ptr, nbytes, _row(offset, "offset")))

    # -- reads -----------------------------------------------------------------

    def get(self, name, arr, start=0):
        """Reads arr.shape[0] consecutive rows from global row `start` into `arr`."""
        # The compiled path: a numpy array of an accepted dtype of a variable
        # read before, in one C call (see _fastcall.c); it answers None for
        # anything else, and the full path below then raises the precise error.
        fast = self._fast
        if fast is not None:
            rc = fast(name, arr, start)
            if rc is not None:
                if rc:
                    self._check(rc)
                return
        prof = self._prof
        if prof:
            t0 = _perf()
        h = self._h
        if h is None:
            self._handle()  # raises
        var, ptr, nbytes, itemsize, rows, gpu = self._destination(name, arr)
        if itemsize != var.itemsize:
            self._itemsize_check(var, name, itemsize)
        if type(start) is not int:
            start = _row(start, "start")
        try:
            if gpu:
                # Ordered on torch's current stream: later work on it sees the rows.
                rc = self._c_get_stream(h, var.cname, ptr, nbytes, start, rows,
                                        self._device(arr, ptr, nbytes, name, "destination"))
            else:
                rc = self._c_get(h, var.cname, ptr, nbytes, start, rows)
        except OverflowError:  # cffi refuses an int outside int64_t before calling
            _row(start, "start")
            raise
        if rc:
            self._check(rc)
        if prof:
            self._py_gets += 1
            self._py_get += _perf() - t0

    def _destination(self, name, arr):
        """Variable `name` and the destination `arr` of a read, for get and
        get_batch: (var, ptr, nbytes, itemsize, rows, gpu); the caller checks
        the item size (after its device check, if it has one). The shortcut:
        a writable C-contiguous numpy array of an accepted dtype of the
        variable's item size (from_buffer refuses read-only and non-contiguous
        arrays; len() refuses 0-d ones). Anything else takes the full checks,
        which raise the precise error."""
        try:
            var = self._vars.get(name) or self._var(name)
        except TypeError:  # an unhashable name
            var = self._var(name)
        if type(arr) is _ndarray and arr.dtype in var.dtypes:
            try:
                ptr = _from_buffer(_CHARS, arr, True)
                return var, ptr, len(ptr), var.itemsize, len(arr), False
            except (ValueError, TypeError, BufferError):
                pass
        ptr, nbytes, itemsize, rows, _, gpu = extract(arr, "arr", writable=True)
        return var, ptr, nbytes, itemsize, rows, gpu

    def get_batch(self, name, arr, indices):
        """Row i of `arr` receives global row indices[i]. Collective for method 0 in the collective batch mode."""
        prof = self._prof
        if prof:
            t0 = _perf()
        h = self._h
        if h is None:
            self._handle()  # raises
        var, ptr, nbytes, iptr, n, stream, _ = self._batch_args(name, arr, indices)
        if stream is not None:
            rc = self._c_get_batch_stream(h, var.cname, ptr, nbytes, iptr, n, stream)
        else:
            rc = self._c_get_batch(h, var.cname, ptr, nbytes, iptr, n)
        if rc:
            self._check(rc)
        if prof:
            self._py_gets += 1
            self._py_get += _perf() - t0

    def _batch_args(self, name, arr, indices, call=None):
        """The checked arguments of get_batch and get_batch_async: (var, ptr,
        nbytes, iptr, n, stream, idx), where stream is None for a host `arr`
        and idx is the int64 array iptr points into (a request keeps it
        alive). On a bad argument, a collective batch is failed on every rank
        (dds_fail_collective) before the error is raised."""
        try:
            var, ptr, nbytes, itemsize, rows, gpu = self._destination(name, arr)
            stream = self._device(arr, ptr, nbytes, name, "destination") if gpu else None
            if itemsize != var.itemsize:
                self._itemsize_check(var, name, itemsize)
            iptr = None
            idx = indices
            if type(indices) is _ndarray and indices.dtype is _INT64 and indices.ndim == 1:
                try:  # the hot path: no copy, no per-element work (from_buffer refuses non-contiguous)
                    iptr = _from_buffer(_I64_ARRAY, indices)
                except (ValueError, TypeError, BufferError):
                    iptr = None
            if iptr is None:
                idx = _args.indices(indices)
                iptr = _from_buffer(_I64_ARRAY, idx)
            n = len(iptr)
            if rows != n:
                raise InvalidArgumentError(f"arr has {rows} rows but {n} indices were given")
        except Exception as exc:
            if self._collective():
                self._fail_collective(_lib.DDS_CALL_GET_BATCH if call is None else call, name, exc)
            raise
        return var, ptr, nbytes, iptr, n, stream, idx

    def get_batch_async(self, name, arr, indices):
        """Starts get_batch and returns at once with a request: ``req.wait()``,
        ``req.done()`` (pyddstore._requests). Collective for method 0 in the
        collective batch mode, as get_batch."""
        return _requests.start(self, name, arr, indices)

    def register_recv(self, name, arr):
        """Registers `arr` as a destination for reads of `name` (kept alive until unregistered)."""
        h = self._handle()
        var = self._var(name)
        ptr, nbytes, _, _, _, gpu = extract(arr, "arr", writable=True, check_dtype=False)
        if gpu:
            self._device(arr, ptr, nbytes, name, "destination")
        if nbytes == 0:
            return
        self._check(self._lib.dds_register_recv(h, var.cname, ptr, nbytes))
        self._recv[(name, address(ptr))] = arr

    def unregister_recv(self, name, arr):
        """Undoes register_recv for the buffer starting where `arr` starts."""
        h = self._handle()
        var = self._var(name)  # UnknownVariableError for an unknown name, on every method
        ptr = extract(arr, "arr", check_dtype=False)[0]
        key = (name, address(ptr))
        if key not in self._recv:
            if self._method == 0:
                return  # DDStore 3.0 ignores this for method 0
            raise InvalidArgumentError(f"buffer is not registered for '{name}'")
        self._check(self._lib.dds_unregister_recv(h, var.cname, ptr))
        del self._recv[key]

    # -- ragged variables (pyddstore/_ragged.py, docs/ragged.md) --------------

    def add_ragged(self, name, data, lengths=None, *, dtype=None, row_shape=None):
        """Registers ragged variable `name` from this rank's samples, either
        ``add_ragged(name, flat, lengths)`` (flat's first axis split by
        lengths) or ``add_ragged(name, list_of_arrays)``; a rank without
        samples passes ``[]`` with dtype= and row_shape=. Collective."""
        _ragged.add_ragged(self, name, data, lengths, dtype=dtype, row_shape=row_shape)

    def join_ragged(self, name, dtype=None, row_shape=None):
        """Method-2 extra: join ragged variable `name` (dtype and row shape
        tell reads how to view its rows)."""
        _ragged.join_ragged(self, name, dtype, row_shape)

    def ragged_lengths(self, name, indices):
        """Lengths (rows) of samples `indices`, an int64 array."""
        return _ragged.lengths(self, name, indices)

    def get_ragged(self, name, i, dtype=None, row_shape=None):
        """Sample i of ragged variable `name` as one array."""
        return _ragged.get(self, name, i, dtype, row_shape)

    def get_ragged_batch(self, name, indices, dtype=None, row_shape=None):
        """(flat, lengths): samples `indices` back to back and their lengths;
        ``pyddstore.split_ragged(flat, lengths)`` gives one view per sample."""
        return _ragged.get_batch(self, name, indices, dtype, row_shape)

    def get_ragged_batch_into(self, name, out, indices, dtype=None, row_shape=None):
        """As get_ragged_batch, into the caller's writable host array `out`
        (at least the samples' bytes); returns (flat view of out, lengths)."""
        return _ragged.get_batch_into(self, name, out, indices, dtype, row_shape)

    # -- queries ---------------------------------------------------------------

    def info(self, name):
        """(total_rows, disp, itemsize) of `name`."""
        self._handle()  # the answer may come from the cache: refuse it after free or MPI_Finalize
        var = self._var(name)
        return var.total_rows, var.disp, var.itemsize

    def device_path(self, name):
        """How rows of `name` reach device buffers: "host-only" (no GPU driver,
        or GPU support off), "staged", "gpudirect" or "refused" (see docs/gpu.md)."""
        info = self._info(self._var(name).cname)
        return _DEVICE_PATHS.get(info.device_path, "unknown")

    def get_profile(self, name):
        """DDStore 3.0's profile dict: C counters of `name` plus this store's Python timings."""
        var = self._var(name)
        c = _ffi.new("dds_counters *")
        c.struct_size = _ffi.sizeof("dds_counters")
        self._check(self._lib.dds_profile(self._handle(), var.cname, c))
        return {
            "calls": c.calls,
            "rows": c.rows,
            "lock_wait": c.lock_wait_ns * 1e-9,
            "mr": c.mr_ns * 1e-9,
            "mr_miss": c.mr_miss,
            "read": c.read_ns * 1e-9,
            "cq": c.cq_ns * 1e-9,
            "req_bytes_sent": c.req_bytes_sent,
            "req_bytes_recv": c.req_bytes_recv,
            "batch_mode": _BATCH_MODES.get(c.batch_mode, "collective"),
            "batch_checks": c.batch_checks,
            "batch_calls_onesided": c.batch_calls_onesided,
            "py_gets": self._py_gets,
            "py_get": self._py_get,
            "py_sync": self._py_sync,
        }

    @property
    def method(self):
        return self._method

    @property
    def settings(self):
        """The settings this store runs with (a dict; see pyddstore.settings)."""
        return dict(self._settings)

    @property
    def handshake_dir(self):
        """The hand-shake directory (method 2's; for others, the one it would use)."""
        return self._settings["handshake_dir"]

    @property
    def batch_mode(self):
        """'collective', 'onesided' or 'auto' (methods 1 and 2 are always
        one-sided); get_profile(name)["batch_mode"] says which mode auto chose."""
        return self._settings["batch_mode"]

    # -- epochs and lifetime ---------------------------------------------------

    def epoch_begin(self):
        """Opens a read epoch (collective; RuntimeError if one is open)."""
        self._check(self._lib.dds_epoch_begin(self._handle()))

    def epoch_end(self):
        """Closes the read epoch (collective; RuntimeError if none is open)."""
        self._check(self._lib.dds_epoch_end(self._handle()))

    def free(self):
        """Releases the store (collective for method 0). Idempotent; safe after MPI_Finalize."""
        h, self._h = self._h, None
        if h is None:
            return
        fast, self._fast = self._fast, None
        if fast is not None:
            fast.__self__.close()  # a thread already past `self._fast` takes the full path
        self._recv.clear()
        self._vars.clear()
        self._check(self._lib.dds_destroy(h))

    def __del__(self):
        # May run at interpreter exit, after MPI_Finalize or with modules
        # half torn down: never let an error escape from here.
        try:
            self.free()
        except BaseException:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def __repr__(self):
        state = "freed" if self._h is None else f"{len(self._vars)} known variables"
        return f"<PyDDStore method={getattr(self, '_method', '?')} {state}>"
