"""free() and garbage collection after MPI_Finalize. Run:

    mpiexec -n 2 python free_after_finalize.py

Stores still alive when MPI is finalised must be releasable without error or
hang: explicitly (free, twice), from a __del__, and at interpreter exit; every
other call on them raises BadStateError (info too, whose answer Python caches).
Exits non-zero if anything raised where it should not. The stores use
method $PYDDSTORE_TEST_METHOD (default 0).
"""

import gc
import os
import sys

import numpy as np
from mpi4py import MPI

import pyddstore as dds

METHOD = int(os.environ.get("PYDDSTORE_TEST_METHOD", "0"))


def new_store(comm, **kw):
    return dds.PyDDStore(comm, method=METHOD, **kw)


class Holder:
    """Frees its store from __del__, as HydraGNN's datasets do."""

    def __init__(self, comm):
        self.store = new_store(comm)
        self.store.add("x", np.zeros((3, 2), np.float64))

    def __del__(self):
        self.store.free()


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size  # not callable after MPI_Finalize
    failures = []

    twice = new_store(comm)
    twice.add("x", np.ones((2, 2), np.float32))
    twice.free()
    twice.free()

    explicit = new_store(comm)
    explicit.add("x", np.full((4, 2), comm.rank, np.int32))
    explicit.epoch_begin()
    out = np.empty((1, 2), np.int32)
    explicit.get("x", out, 4 * comm.size - 1)
    explicit.epoch_end()
    if not (out == comm.size - 1).all():
        failures.append("read before finalize")

    holder = Holder(comm)
    global at_exit  # released by the interpreter at exit, after MPI_Finalize
    at_exit = new_store(comm)
    at_exit.add("x", np.zeros((1000, 10), np.float64))
    sub = comm.Split(comm.rank % 2, comm.rank)
    on_sub = new_store(sub, ddstore_width=1)
    on_sub.add("y", np.zeros((2, 2), np.uint8))

    MPI.Finalize()

    try:
        explicit.get("x", out, 0)
        failures.append("get after finalize did not raise")
    except RuntimeError as exc:
        if "finalized" not in str(exc):
            failures.append(f"unexpected message: {exc}")
    # Every other call raises BadStateError naming MPI_Finalize, including
    # those Python could answer from its cache of variable info ("x" is
    # cached: it was read above).
    rows = np.full((1, 2), 5, np.int32)
    after = {
        "info": lambda: explicit.info("x"),
        "update": lambda: explicit.update("x", rows, 0),
        "get_profile": lambda: explicit.get_profile("x"),
        "get_batch": lambda: explicit.get_batch("x", out, [0]),
        "register_recv": lambda: explicit.register_recv("x", out),
        "unregister_recv": lambda: explicit.unregister_recv("x", out),
        "device_path": lambda: explicit.device_path("x"),
        "epoch_begin": lambda: explicit.epoch_begin(),
        "epoch_end": lambda: explicit.epoch_end(),
        "add": lambda: explicit.add("z", rows),
        "init": lambda: explicit.init("z", 1, 1, 4),
        "info of a sub-communicator store": lambda: on_sub.info("y"),
    }
    for what, call in after.items():
        try:
            call()
            failures.append(f"{what} after finalize did not raise")
        except dds.BadStateError as exc:
            if "finalized" not in str(exc):
                failures.append(f"{what} after finalize: message {exc} does not say finalized")
        except Exception as exc:
            failures.append(f"{what} after finalize raised {type(exc).__name__}: {exc}, not BadStateError")
    for store in (explicit, on_sub):
        try:
            store.free()
            store.free()
        except Exception as exc:
            failures.append(f"free after finalize raised {exc!r}")
    try:
        del holder
        gc.collect()
    except Exception as exc:
        failures.append(f"__del__ after finalize raised {exc!r}")

    for f in failures:
        print(f"rank {rank}: {f}", file=sys.stderr)
    if not failures:
        print(f"free-after-finalize: method {METHOD}, rank {rank} of {size} OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
