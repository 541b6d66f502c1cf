"""Method 2, core job (DDStore's test_method2_core.py, without sentinels). Run:

    mpiexec -n N python method2_core.py HANDSHAKE_DIR N_EXTRAS

Every rank adds an 8x4 float32 shard filled with rank+1 as variable "x"
(PyDDStore(comm, method=2, handshake_dir=D)), checks it can read every core
rank's rows, then waits until N_EXTRAS extra stores announced they are done
(dds_wait_extras) and frees. Exits non-zero on any failure.
"""

import sys

import numpy as np
from mpi4py import MPI

import pyddstore as dds

comm = MPI.COMM_WORLD
hs, n_extras = sys.argv[1], int(sys.argv[2])
store = dds.PyDDStore(comm, method=2, handshake_dir=hs)
store.add("x", np.full((8, 4), comm.rank + 1, dtype=np.float32))
comm.Barrier()
row = np.zeros((1, 4), dtype=np.float32)
for r in range(comm.size):
    store.get("x", row, r * 8)
    assert (row == r + 1).all(), (r, row)
assert store.info("x") == (8 * comm.size, 4, 4)
# Extras announce they are done (extra_done); the core waits (every rank,
# collective) before freeing the memory they read.
store.wait_extras(n_extras, 120000)
store.free()
if comm.rank == 0:
    print(f"method2_core.py: {n_extras} extra store(s) done: PASS", flush=True)
