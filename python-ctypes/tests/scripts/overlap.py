"""Overlapping reads with compute (docs/pytorch.md includes the marked
regions). Run on any number of ranks:

    mpiexec -n 2 python overlap.py

First a plain PyDDStore loop that starts the next batch's read before the
current batch's step (get_batch_async), then a ThreadDataLoader with
prefetch=2 over a DistDataset. A sleep stands for the step (a GPU's work).
Every row is checked against the formula it was stored from, and the
loader's batches against prefetch=0. DDSTORE_METHOD picks the backend.
Exits non-zero (on every rank) on a wrong row.
"""

import os
import time

import numpy as np
import torch  # torch first, then MPI (mpi4py starts MPI when imported)
from mpi4py import MPI

import pyddstore
from pyddstore.torch import DistDataset, ThreadDataLoader

comm = MPI.COMM_WORLD
method = int(os.environ.get("DDSTORE_METHOD", "0"))
ROWS, WIDTH, B, STEPS = 200, 64, 32, 6
ok = True


def step(batch):
    time.sleep(0.005)  # the model's step; the next batch's rows arrive meanwhile


# [snippet:python-overlap]
store = pyddstore.PyDDStore(comm, method=method)
mine = np.arange(ROWS * WIDTH, dtype=np.float32).reshape(ROWS, WIDTH) + comm.rank * ROWS * WIDTH
store.add("x", mine)                       # row g holds g * WIDTH ... g * WIDTH + WIDTH - 1
total = ROWS * comm.size
rng = np.random.default_rng(comm.rank)
order = [rng.integers(0, total, size=B) for _ in range(STEPS)]   # known ahead (a sampler)

bufs = [np.empty((B, WIDTH), np.float32) for _ in range(2)]
req = store.get_batch_async("x", bufs[0], order[0])             # the first batch
for s in range(STEPS):
    req.wait()                                                   # rows of batch s are in bufs[s % 2]
    if s + 1 < STEPS:                                            # start batch s + 1 ...
        req = store.get_batch_async("x", bufs[(s + 1) % 2], order[s + 1])
    step(bufs[s % 2])                                            # ... while batch s is used
    ok &= np.array_equal(bufs[s % 2][:, 0], order[s] * WIDTH)
comm.Barrier()
store.free()                               # collective with method 0
# [end-snippet]


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 300

    def __getitem__(self, i):
        return torch.full((8,), float(i * i)), i


ds = DistDataset(Squares(), "squares", comm=comm, method=method)
sampler = torch.utils.data.DistributedSampler(ds, num_replicas=comm.size, rank=comm.rank, seed=1)
# [snippet:pytorch-prefetch]
loader = ThreadDataLoader(ds, batch_size=16, sampler=sampler, num_workers=1, prefetch=2)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for x, i in loader:          # the reads of the next 2 batches are in flight meanwhile
        step(x)
# [end-snippet]
        ok &= bool(torch.equal(x[:, 0], (i * i).float()))
plain = ThreadDataLoader(ds, batch_size=16, sampler=sampler, num_workers=1, prefetch=0)
for a, b in zip(loader, plain):
    ok &= bool(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]))
loader.close()
plain.close()
comm.Barrier()
ds.ddstore.free()

ok = comm.allreduce(bool(ok), op=MPI.LAND)
if comm.rank == 0:
    print("overlap OK" if ok else "overlap FAILED")
raise SystemExit(0 if ok else 1)
