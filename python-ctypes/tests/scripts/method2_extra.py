"""Method 2, extra job (DDStore's test_method2_extra.py). Run, as a separate
launch from the core job:

    mpiexec -n M python method2_extra.py HANDSHAKE_DIR N_CORE

PyDDStore(None, method=2, handshake_dir=D, n_core=N), join("x"), read every
row (get and get_batch) and check row g holds g // 8 + 1, then announce done
(dds_extra_done) and free. Exits non-zero on any failure.
"""

import sys

import numpy as np
from mpi4py import MPI

import pyddstore as dds

hs, n_core = sys.argv[1], int(sys.argv[2])
store = dds.PyDDStore(None, method=2, handshake_dir=hs, n_core=n_core)
store.join("x")
total, disp, itemsize = store.info("x")
assert (total, disp, itemsize) == (8 * n_core, 4, 4), store.info("x")
want = (np.arange(total) // 8 + 1).astype(np.float32)
out = np.zeros((total, 4), dtype=np.float32)
for g in range(total):
    store.get("x", out[g:g + 1], g)
bad = [g for g in range(total) if not (out[g] == want[g]).all()]
idx = np.random.default_rng(MPI.COMM_WORLD.rank).permutation(total)
batch = np.zeros((total, 4), dtype=np.float32)
store.get_batch("x", batch, idx)
bad += [int(g) for i, g in enumerate(idx) if not (batch[i] == want[g]).all()]
assert not bad, f"rows with wrong values: {bad}"
try:
    store.add("y", np.zeros((1, 4), np.float32))
    raise AssertionError("an extra member must not add")
except RuntimeError:
    pass
store.extra_done()
store.free()
print(f"method2_extra.py (rank {MPI.COMM_WORLD.rank}): {total} rows checked: PASS", flush=True)
