"""Snapshots through pyddstore (issue 38): PyDDStore.save on 2 ranks, load on
1 and 3 (whatever of that the world's size allows), every row and sample
compared with a formula of its global index; errors raised on every rank
alike, with the library's message. The torch datasets' save/from_snapshot
are in test_torch_snapshot.py.
"""

import os
import shutil
import tempfile

import numpy as np
import pytest
from mpi4py import MPI

import pyddstore as dds
from helpers import METHODS, RankChecks, make_store

WORLD = MPI.COMM_WORLD
F = 3


def rows_of(g):
    return np.stack([np.arange(F, dtype=np.float64) + 10.0 * i for i in g]) if len(g) else np.zeros((0, F))


def sample(g):
    return np.full(((g * 7) % 5, F), g + 0.5, dtype=np.float32)


@pytest.fixture
def snapdir():
    base = tempfile.mkdtemp(prefix="pyddstore-snap-") if WORLD.rank == 0 else None
    base = WORLD.bcast(base, root=0)
    yield os.path.join(base, "snap")
    WORLD.barrier()
    if WORLD.rank == 0:
        shutil.rmtree(base, True)


def sub(n):
    """A communicator of the first n ranks of the world (None elsewhere)."""
    n = min(n, WORLD.size)
    c = WORLD.Split(0 if WORLD.rank < n else MPI.UNDEFINED, WORLD.rank)
    return c if c != MPI.COMM_NULL else None


@pytest.mark.parametrize("method", METHODS[:2])
def test_save_2_load_1_and_3(snapdir, method):
    saver = sub(2)
    if saver is not None:
        r, p = saver.rank, saver.size
        s = make_store(saver, method)
        n = 3 + 4 * r  # uneven shards
        first = sum(3 + 4 * q for q in range(r))
        s.add("fx", rows_of(range(first, first + n)))
        k = 2 + r
        s0 = sum(2 + q for q in range(p) if q < r)
        s.add_ragged("rg", [sample(g) for g in range(s0, s0 + k)])
        s.save(snapdir)
        s.free()
        total, samples = sum(3 + 4 * q for q in range(p)), sum(2 + q for q in range(p))
    else:
        total = samples = None
    total, samples = WORLD.bcast((total, samples), root=0)
    ck = RankChecks(WORLD)
    for n in (1, 3):
        comm = sub(n)
        if comm is None:
            continue
        t = make_store(comm, method)
        t.load(snapdir)
        info = t.info("fx")
        ck(info[0] == total, f"{n} ranks: total rows {info}")
        out = np.zeros((total, F))
        for g in range(total):
            t.get("fx", out[g:g + 1], g)
        ck(np.array_equal(out, rows_of(range(total))), f"{n} ranks: fixed rows")
        for g in range(samples):
            ck(np.array_equal(t.get_ragged("rg", g, dtype=np.float32, row_shape=(F,)), sample(g)), f"{n} ranks: sample {g}")
        # Errors, on every rank of the store alike.
        with pytest.raises(dds.DuplicateVariableError, match="'fx' already exists"):
            t.load(snapdir, ["fx"])
        with pytest.raises(dds.UnknownVariableError, match="no variable named 'zz' in snapshot"):
            t.load(snapdir, "zz")
        with pytest.raises(dds.HandshakeIOError, match="is missing"):
            t.load(snapdir + "-nothing")
        bad = "x\0y" if comm.rank == comm.size - 1 else snapdir
        with pytest.raises(dds.InvalidArgumentError, match="NUL"):
            t.save(bad)
        t.free()
        comm.Free()
    ck.done()
