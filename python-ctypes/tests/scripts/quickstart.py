"""The Python quick start of the documentation (docs/quickstart-python.md
includes the marked region). Run on any number of ranks, for example

    mpiexec -n 4 python -m mpi4py quickstart.py

Every rank adds its shard of a table, then reads one row held by its
neighbour and a batch of random rows from every rank, and checks them.
Exits non-zero (on every rank) if any row reads back wrong.
"""

# [snippet:python-quickstart]
import numpy as np
from mpi4py import MPI

import pyddstore as dds

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size

# This rank's shard: 100 rows of 8 float64 values. Shards are concatenated
# in rank order, so rank r holds the global rows 100*r .. 100*r + 99.
# Element c of global row g is g + c / 100, so any row can be checked.
ROWS, COLS = 100, 8
first = rank * ROWS
shard = np.arange(first, first + ROWS, dtype=np.float64)[:, None] + np.arange(COLS) / 100

store = dds.PyDDStore(comm)        # collective: method 0 (MPI RMA) over all ranks
store.add("table", shard)          # collective: the store keeps its own copy
total, cols, itemsize = store.info("table")

# One row held by the next rank: a one-sided read, no help from its owner.
g = ((rank + 1) % size) * ROWS + 7
row = np.empty((1, COLS))
store.get("table", row, g)
ok = row[0, 0] == g

# 32 random rows from anywhere: row i of `batch` receives global row idx[i].
# With method 0 get_batch is collective: every rank calls it, with its own indices.
rng = np.random.default_rng(seed=rank)
idx = rng.integers(0, total, size=32)
batch = np.empty((len(idx), COLS))
store.get_batch("table", batch, idx)
ok = ok and np.array_equal(batch, idx[:, None] + np.arange(COLS) / 100)

print(f"rank {rank}: {total} rows of {cols} x {itemsize}-byte values; "
      f"row {g} starts with {row[0, 0]:.2f}; batch of {len(idx)} rows {'verified' if ok else 'WRONG'}")
store.free()                       # collective with method 0
# [end-snippet]

all_ok = comm.allreduce(bool(ok), op=MPI.LAND)
if rank == 0:
    print("quickstart OK" if all_ok else "quickstart FAILED")
raise SystemExit(0 if all_ok else 1)
