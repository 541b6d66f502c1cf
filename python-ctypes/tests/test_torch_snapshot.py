"""DistDataset.save / DistDataset.from_snapshot (issue 38): a dataset saved on
the world is rebuilt without its source on the world and on one rank (its
own COMM_SELF), every sample equal to the source's; the schema travels in
the snapshot."""

import os
import shutil
import tempfile

from mpi4py import MPI

from pyddstore.torch import DistDataset
from helpers import agree
from torch_helpers import METHODS, N, Checks, DictSource, TupleSource

WORLD = MPI.COMM_WORLD


def test_save_and_from_snapshot():
    base = tempfile.mkdtemp(prefix="pyddstore-torch-snap-") if WORLD.rank == 0 else None
    base = WORLD.bcast(base, root=0)
    ck = Checks()
    try:
        for method in [m for m in METHODS if m < 2]:
            for src in (DictSource(),) if method else (TupleSource(),):
                snap = os.path.join(base, f"{type(src).__name__}-{method}")
                ds = DistDataset(src, "d", comm=WORLD, method=method)
                ds.save(snap)
                ds.ddstore.free()
                for comm in (WORLD, MPI.COMM_SELF):
                    back = DistDataset.from_snapshot(snap, "d", comm=comm, method=method)
                    ck.true(len(back) == N, f"len {len(back)}")
                    for i in range(N):
                        ck.same(back[i], src[i], f"method {method}, {type(src).__name__}[{i}], {comm.Get_size()} ranks")
                    comm.Barrier()
                    back.ddstore.free()
    finally:
        WORLD.Barrier()
        if WORLD.rank == 0:
            shutil.rmtree(base, True)
    assert agree(WORLD, ck.ok), ck.errors
