"""End to end: DistributedDataParallel training (gloo) with a
ThreadDataLoader over a DistDataset gives exactly the losses and weights of
the same training with torch's DataLoader over the in-memory dataset.

Why exactly equal, not merely close:
* the store holds the samples' bytes, so every tensor read back is
  bit-identical to the source's;
* the same DistributedSampler (seed, epoch) gives every rank the same
  batches in the same order, and default_collate stacks them the same way;
* ThreadDataLoader draws one int64 from the global RNG per epoch, as
  DataLoader's iterator does for its workers' seed, so the dropout masks
  the training loop draws afterwards are the same;
* the CPU kernels run with one thread and gloo's allreduce sums in a fixed
  order for a fixed world size, so nothing else varies between the runs.
"""

import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from helpers import agree
from pyddstore.torch import DistDataset, ThreadDataLoader
from torch_helpers import METHODS, N, ds_kwargs, threads_for

FEATURES = 12


class Regression:
    """(x, y): y = w.x + noise, float32; made on the fly."""

    def __init__(self):
        rng = np.random.default_rng(2024)
        self.x = rng.standard_normal((N, FEATURES)).astype(np.float32)
        w = rng.standard_normal(FEATURES).astype(np.float32)
        self.y = (self.x @ w + 0.1 * rng.standard_normal(N)).astype(np.float32)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


@pytest.fixture(scope="module")
def process_group(comm_world):
    port = None
    if comm_world.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = comm_world.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=comm_world.rank, world_size=comm_world.size)
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def comm_world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def train(loader, sampler, data):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Dropout(0.25),
                                torch.nn.Linear(16, 1))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.5)
    losses = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = F.mse_loss(ddp(x).squeeze(-1), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    # The loss after two epochs: the trained model on the whole dataset.
    model.eval()
    with torch.no_grad():
        x = torch.from_numpy(data.x)
        final = F.mse_loss(model(x).squeeze(-1), torch.from_numpy(data.y)).item()
    return losses, final, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("method", METHODS)
def test_ddp_training_matches_plain_dataset(comm, process_group, method, reuse):
    data = Regression()
    size, rank = comm.size, comm.rank

    def sampler(ds):
        # drop_last=False pads: every rank gets ceil(N / size) samples, so the
        # same number of batches (method 0's batched reads are collective).
        return DistributedSampler(ds, num_replicas=size, rank=rank, shuffle=True, seed=7)

    s_plain = sampler(data)
    plain = train(DataLoader(data, batch_size=4, sampler=s_plain), s_plain, data)

    ds = DistDataset(data, f"ddp{method}", comm=comm, **ds_kwargs(method, chunk_size=8))
    s_dist = sampler(ds)
    loader = ThreadDataLoader(ds, batch_size=4, sampler=s_dist, num_workers=threads_for(method),
                              reuse_buffers=reuse)
    stored = train(loader, s_dist, data)
    loader.close()
    comm.Barrier()
    ds.ddstore.free()

    per_rank = -(-N // size)
    losses_ok = stored[0] == plain[0] and len(plain[0]) == 2 * -(-per_rank // 4)
    final_ok = stored[1] == plain[1]
    params_ok = all(torch.equal(a, b) for a, b in zip(stored[2], plain[2]))
    learned = plain[1] < F.mse_loss(torch.zeros(N), torch.from_numpy(data.y)).item()
    if rank == 0:
        print(f"\nmethod {method}, reuse_buffers={reuse}: loss after two epochs {stored[1]:.6f} "
              f"(plain {plain[1]:.6f}), {len(stored[0])} steps")
    assert agree(comm, losses_ok and final_ok and params_ok and learned), (stored[:2], plain[:2])
