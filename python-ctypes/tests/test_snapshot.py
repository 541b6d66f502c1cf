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


LARGE_ELEMS = 375  # 3000-byte rows: re-sharded ranks start mid-page in the saved files


def large_rows(g):
    g = np.asarray(g, dtype=np.float64)[:, None]
    return g * 1000.0 + np.arange(LARGE_ELEMS, dtype=np.float64)[None, :]


def test_large_load_threads_and_a_bad_later_chunk(snapdir):
    """Shards of several checksum chunks (about 12 MiB a rank): loaded on the
    same ranks (chunks read in place with O_DIRECT on the reader threads)
    and on one rank fewer (unaligned, through the readers' buffers); then a
    byte flipped in the last chunk of the last file fails the load on every
    rank with that chunk named, and the store stays usable."""
    comm = WORLD
    n = 4096 + 37 * comm.rank  # uneven shards, files not a whole number of pages
    first = sum(4096 + 37 * q for q in range(comm.rank))
    total = comm.allreduce(n)
    s = make_store(comm, 0)
    s.add("big", large_rows(range(first, first + n)))
    s.save(snapdir)
    s.free()
    ck = RankChecks(comm)
    rng = np.random.default_rng(5)
    idx = np.unique(np.concatenate([rng.integers(0, total, 512), [0, total - 1],
                                    np.cumsum([4096 + 37 * q for q in range(comm.size)])[:-1]]))
    for ranks in sorted({comm.size, max(1, comm.size - 1)}):
        c = sub(ranks)
        if c is not None:
            t = make_store(c, 0)
            t.load(snapdir)
            ck(t.info("big")[0] == total, f"{ranks} ranks: total rows")
            out = np.zeros((len(idx), LARGE_ELEMS))
            for k, g in enumerate(idx):
                t.get("big", out[k:k + 1], int(g))
            ck(np.array_equal(out, large_rows(idx)), f"{ranks} ranks: rows after a large load")
            t.free()
            c.Free()
        comm.Barrier()
    last = os.path.join(snapdir, f"v0.r{comm.size - 1}.data")
    if comm.rank == 0:
        with open(last, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            b = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([b[0] ^ 1]))
    comm.Barrier()
    size = (4096 + 37 * (comm.size - 1)) * LARGE_ELEMS * 8
    chunk = 4 << 20
    t = make_store(comm, 0)
    with pytest.raises(dds.HandshakeIOError, match=f"v0.r{comm.size - 1}.data: checksum mismatch in chunk "
                       f"{(size - 1) // chunk} "):
        t.load(snapdir)
    with pytest.raises(dds.UnknownVariableError):
        t.info("big")  # nothing of the failed load stays registered
    t.add("after", large_rows(range(comm.rank, comm.rank + 2)))
    out = np.zeros((1, LARGE_ELEMS))
    t.get("after", out, 0)
    ck(np.array_equal(out, large_rows([0])), "store usable after the failed load")
    t.free()
    ck.done()
