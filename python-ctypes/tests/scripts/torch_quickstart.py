"""The PyTorch quick start of the documentation (docs/pytorch.md includes
the marked region). Run on any number of ranks, for example

    mpiexec -n 4 python torch_quickstart.py

Every rank stores its share of a dataset in DDStore, then the ranks train a
small model with DistributedDataParallel (gloo), each reading its batches
from every rank's share. DDSTORE_METHOD picks the backend (default 0).
Exits non-zero (on every rank) if the loss did not go down.
"""

# [snippet:pytorch-quickstart]
import os

import torch  # torch first, then MPI (mpi4py starts MPI when imported)
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Dataset, DistributedSampler

from mpi4py import MPI
from pyddstore.torch import DistDataset, ThreadDataLoader


class Curves(Dataset):
    """2000 samples (x, y), made on demand as if read from files."""

    def __len__(self):
        return 2000

    def __getitem__(self, i):
        x = torch.rand(16, generator=torch.Generator().manual_seed(i)) * 2 - 1
        return x, torch.sin(3 * x).sum()


comm = MPI.COMM_WORLD
# Collective: rank r reads only its share of the 2000 samples, 100 at a time,
# into the store. Afterwards any rank can read any sample.
train = DistDataset(Curves(), "curves", comm=comm, chunk_size=100)

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29500")
dist.init_process_group("gloo", rank=comm.rank, world_size=comm.size)

# Each rank gets its part of every epoch, and the same number of batches
# (with method 0, batched reads are collective: one worker thread).
sampler = DistributedSampler(train, num_replicas=comm.size, rank=comm.rank, shuffle=True, seed=0)
loader = ThreadDataLoader(train, batch_size=50, sampler=sampler, num_workers=1, reuse_buffers=True)

torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for epoch in range(4):
    sampler.set_epoch(epoch)
    total = 0.0
    for x, y in loader:          # x: (50, 16), y: (50,), read from all ranks
        opt.zero_grad()
        loss = F.mse_loss(model(x).squeeze(-1), y)
        loss.backward()
        opt.step()
        total += loss.item()
    losses.append(total / len(loader))
    if comm.rank == 0:
        print(f"epoch {epoch}: mean loss {losses[-1]:.4f}")

loader.close()                   # stops the threads, releases the buffers
dist.destroy_process_group()
comm.Barrier()                   # every rank has finished reading ...
train.ddstore.free()             # ... before the store goes (collective with method 0)
# [end-snippet]

ok = comm.allreduce(bool(losses[-1] < 0.8 * losses[0]), op=MPI.LAND)
if comm.rank == 0:
    print("torch quickstart OK" if ok else f"torch quickstart FAILED: losses {losses}")
raise SystemExit(0 if ok else 1)
