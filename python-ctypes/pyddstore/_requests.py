"""Non-blocking batched reads: ``PyDDStore.get_batch_async`` and its request.

``req = store.get_batch_async(name, arr, indices)`` starts reading as
``get_batch`` does and returns at once; the rows progress on a library thread
while Python computes. ``req.wait()`` blocks (without the GIL) until they are
in ``arr`` and raises the read's error (cffi releases the GIL around every call); ``req.done()`` never blocks. The
request keeps ``arr``, the indices and the store alive until it completes.
Errors in the arguments (name, dtype, shape, index) are raised by
``get_batch_async`` itself. With method 0 in the collective batch mode the
start is collective, as ``get_batch`` is: every rank starts the same
requests in the same order.
"""

import atexit
import threading
import weakref

from . import _lib
from ._errors import BadStateError

_ffi = _lib.ffi

# Requests not yet waited for. At interpreter exit they are waited for
# (`_finish_at_exit`) *before* mpi4py's MPI_Finalize: that handler is
# registered at the first start, after mpi4py's own (a store needs MPI
# running, so mpi4py.MPI was imported before), and atexit runs handlers in
# reverse order. MPI_Finalize with reads still running on library threads is
# safe only where the program calls libddstore's MPI_Finalize, which mpi4py
# does not (see docs/guarantees.md).
_live = weakref.WeakSet()
_at_exit = []


def _finish_at_exit():
    for req in list(_live):
        req._abandon()


class BatchRequest:
    """One batched read in flight (from :meth:`PyDDStore.get_batch_async`)."""

    __slots__ = ("_store", "_lib", "_req", "_arr", "_idx", "_lock", "__weakref__")

    def __init__(self, store, req, arr, idx):
        self._store = store  # keeps the store (and so the library) alive
        self._lib = store._lib
        self._req = req
        self._arr = arr  # written until the read completes
        self._idx = idx
        self._lock = threading.Lock()

    def done(self):
        """True once the read has completed (wait() then returns at once)."""
        # No lock: a wait in another thread holds it until the rows are in.
        req = self._req
        if req is None:
            return True
        flag = _ffi.new("int *")
        rc = self._lib.dds_request_test(req, flag)
        if rc:
            if self._req is None:  # waited for (and released) meanwhile
                return True
            self._store._check(rc)
        return bool(flag[0])

    def wait(self):
        """Waits for the rows (the GIL is released meanwhile); raises the read's error.

        A request can be waited for once; a second wait raises BadStateError."""
        with self._lock:
            req, self._req = self._req, None
            if req is None:
                raise BadStateError("this request was already waited for")
            try:
                rc = self._lib.dds_request_wait(req)
                if rc:
                    self._store._check(rc)
            finally:
                self._arr = self._idx = None
        return None

    def _abandon(self):
        # Its read still writes arr, which this object keeps alive, so wait
        # for it before letting go.
        req = getattr(self, "_req", None)
        if req is not None:
            self._req = None
            try:
                self._lib.dds_request_free(req)
            except Exception:  # interpreter shutdown
                pass

    def __del__(self):
        self._abandon()


def start(store, name, arr, indices):
    """The body of PyDDStore.get_batch_async (see the module docstring):
    the arguments are checked as get_batch checks them; a device `arr` is
    staged by the library at wait, so its stream is not used here."""
    h = store._h
    if h is None:
        store._handle()  # raises
    var, ptr, nbytes, iptr, n, _, idx = store._batch_args(name, arr, indices, _lib.DDS_CALL_GET_BATCH_START)
    out = _ffi.new("dds_request **")
    rc = store._lib.dds_get_batch_start(h, var.cname, ptr, nbytes, iptr, n, out)
    if rc:
        store._check(rc)
    req = BatchRequest(store, out[0], arr, idx)
    _live.add(req)
    if not _at_exit:
        atexit.register(_finish_at_exit)
        _at_exit.append(True)
    return req
