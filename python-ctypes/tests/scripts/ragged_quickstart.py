"""The examples of docs/ragged.md, run by run-tests.sh on 2 ranks and
checked: ragged variables through PyDDStore, then RaggedDataset."""

import numpy as np
import torch
from mpi4py import MPI

import pyddstore
from pyddstore import PyDDStore
from pyddstore.torch import RaggedDataset

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
store = PyDDStore(comm)

# [snippet:ragged-python]
# This rank's samples: 3 graphs' node features, 2, 0 and 5 nodes of 16 floats.
feats = [np.full((n, 16), 10 * rank + i, np.float32) for i, n in enumerate([2, 0, 5])]
store.add_ragged("graph/x", feats)                          # or add_ragged(name, flat, lengths)

x = store.get_ragged("graph/x", 2)                          # sample 2 (rank 0's third): shape (5, 16)
flat, lengths = store.get_ragged_batch("graph/x", [2, 0, 2])  # any order, repeats
views = pyddstore.split_ragged(flat, lengths)               # one view per sample
# [end-snippet]
assert x.shape == (5, 16) and (x == 2).all()
assert list(lengths) == [5, 2, 5] and all((v == [2, 0, 2][k]).all() for k, v in enumerate(views))
store.free()

graphs = []
for i in range(3):
    n, e = 3 + i + rank, 4 + 2 * i
    graphs.append({"x": torch.randn(n, 8), "pos": torch.randn(n, 3),
                   "edge_index": torch.randint(0, n, (2, e)), "y": torch.tensor(float(i))})
local_graphs = graphs
# [snippet:ragged-torch]
from pyddstore.torch import RaggedDataset  # noqa: E402,F811

ds = RaggedDataset(local_graphs, "train", comm)      # collective: one variable per field
g = ds[1]                                            # a dict of tensors
batch = ds.get_batch([3 * size - 1, 0, 0])           # one batched read per field
# [end-snippet]
everyone = comm.allgather(graphs)
want = [s for r in everyone for s in r]
assert all(torch.equal(g[k], want[1][k]) for k in g)
assert all(torch.equal(b[k], want[i][k]) for b, i in zip(batch, [3 * size - 1, 0, 0]) for k in b)
ds.free()
if rank == 0:
    print("ragged_quickstart.py: ok")
