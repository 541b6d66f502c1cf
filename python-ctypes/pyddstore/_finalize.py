"""mpi4py's ``MPI.Finalize()`` made safe while libddstore's threads call MPI.

libddstore's threads call MPI: the request threads of ``get_batch_async``
and a method-0 store's progress thread (``DDSTORE_MPI_PROGRESS``). MPICH
turns its thread locks off early in ``MPI_Finalize``, before the callback
that lets the library stop those threads, so a finalize that reaches MPI
while one is inside an MPI call can abort the process ("pthread_mutex_destroy:
Device or resource busy"; 3 runs in 6 here with 8 collective batches in
flight). libddstore defines its own ``MPI_Finalize`` (capi/finalize.rs): it
drains the request threads, stops the progress threads and frees the stores'
MPI objects, then calls MPI's. A C program linked with libddstore before MPI
calls it; mpi4py's ``MPI.Finalize`` is bound to MPI's. So the first store
wraps ``mpi4py.MPI.Finalize`` to call libddstore's instead. Finalising at
interpreter exit needs nothing: pyddstore's atexit handler (_requests.py)
waits for the requests, and the stores are freed in Python's teardown,
before mpi4py's own exit hook finalises MPI.
"""

import sys

_MARK = "_pyddstore_guard"


def guard(lib):
    """Wraps mpi4py.MPI.Finalize once (if mpi4py.MPI is imported) so that it
    runs libddstore's MPI_Finalize (`lib`: the loaded library)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or getattr(mpi.Finalize, _MARK, False):
        return
    original = mpi.Finalize
    c_finalize = lib.MPI_Finalize

    def Finalize():
        if mpi.Is_finalized() or not mpi.Is_initialized():
            return original()  # mpi4py's own error for a finalize out of place
        rc = c_finalize()
        if rc != 0:
            raise mpi.Exception(rc)

    Finalize.__doc__ = original.__doc__
    Finalize.__wrapped__ = original
    setattr(Finalize, _MARK, True)
    mpi.Finalize = Finalize
