"""Shared by the tests: store creation per method, agreement across ranks."""

import atexit
import os
import shutil
import tempfile

import numpy as np
from mpi4py import MPI

import pyddstore as dds

_WORLD = MPI.COMM_WORLD
_hs_base = None
_hs_count = 0


def handshake_dir(suffix=""):
    """A fresh directory per method-2 store, the same path on every rank
    (call it on every rank of the world, in the same order)."""
    global _hs_base, _hs_count
    if _hs_base is None:
        base = tempfile.mkdtemp(prefix="pyddstore-hs-") if _WORLD.rank == 0 else None
        _hs_base = _WORLD.bcast(base, root=0)
        if _WORLD.rank == 0:
            atexit.register(shutil.rmtree, _hs_base, True)
    _hs_count += 1
    path = os.path.join(_hs_base, f"s{_hs_count}{suffix}")
    os.makedirs(path, exist_ok=True)
    return path


def make_store(comm, method, **kw):
    """PyDDStore(comm, method=method) with what each method needs."""
    if method == 2:
        kw.setdefault("handshake_dir", handshake_dir())
    return dds.PyDDStore(comm, method=method, **kw)


def _available_methods():
    """The methods this libddstore build serves: those whose store can be created."""
    found = []
    for m in (0, 1, 2):
        try:
            store = make_store(_WORLD, m)
        except dds.UnsupportedError:
            continue
        store.free()
        found.append(m)
    return found


METHODS = _available_methods()
UNAVAILABLE = [m for m in (0, 1, 2) if m not in METHODS]


def agree(comm, ok):
    """True only if `ok` holds on every rank."""
    return comm.allreduce(bool(ok), op=MPI.LAND)


def shards(comm, local):
    """The whole variable: every rank's shard concatenated in rank order."""
    return np.concatenate(comm.allgather(local))


class RankChecks:
    """Named checks of one test on this rank, reported together.

    ``ck(cond, what)`` records `what` when `cond` is false (and returns
    bool(cond)); ``ck.done(extra)`` all-gathers every rank's failures and
    raises AssertionError on every rank naming each failed check and its
    rank, so a failure on one rank neither hangs the others nor hides which
    check failed. Call done() on every rank, once, at the end.
    """

    def __init__(self, comm):
        self.comm = comm
        self.failed = []

    def __call__(self, cond, what):
        ok = bool(cond)
        if not ok:
            self.failed.append(what)
        return ok

    def done(self, extra=None):
        every = self.comm.allgather(self.failed)
        bad = [f"rank {r}: {w}" for r, ws in enumerate(every) for w in ws]
        if bad and extra is not None:
            bad.append(f"(rank {self.comm.rank}: {extra})")
        assert not bad, "failed checks: " + "; ".join(bad)
