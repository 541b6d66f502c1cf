"""One job of a resumed training (docs/pytorch.md, "Resuming a training
run"); tests/scripts/torch_resume.sh runs the chains and compares them.

    mpiexec -n P python torch_resume.py OUT.npz --prefetch K [--stop-after S CKPT | --save-at S CKPT]
                                        [--resume CKPT]

Builds a DistDataset from its source arrays, trains a small model (the
quick start's, on CPU) for EPOCHS epochs with a ResumableBatchSampler and a
ThreadDataLoader, and writes (rank 0) the global sample order it trained
on (the concatenation, in rank order, of every rank's part of each step)
and the final weights to OUT.npz. --stop-after S saves model, optimizer,
loader state and the order so far to CKPT/state.pt, and the dataset's
snapshot to CKPT/data (DistDataset.save), after step S and stops (--save-at:
and goes on); --resume CKPT starts from such a state, on any number of
ranks, with the dataset loaded from CKPT/data (--from-source: built from
the source arrays again).

The weights are meant to be bitwise equal whatever the number of ranks:
each rank computes the gradient of each of its samples alone (batch of
one), the ranks allgather them, and every rank sums them in the global
batch's order (rank order is that order, the sampler's parts being
contiguous), so the floating-point sum is the same sequence of additions
for any P. DDP's allreduce would instead sum per-rank partial sums, whose
grouping changes with P (bitwise equal then only for a fixed P).
"""

import argparse
import os

import numpy as np
import torch  # torch first, then MPI
import torch.nn.functional as F

from mpi4py import MPI
from pyddstore.torch import DistDataset, ResumableBatchSampler, ThreadDataLoader

N, FEATURES, EPOCHS, GLOBAL_BATCH, SEED = 61, 16, 3, 8, 7  # 61: the last global batch is short (5)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


class Curves:
    """(x, y, i): made from arrays, the same in every job."""

    def __init__(self):
        rng = np.random.default_rng(11)
        self.x = rng.uniform(-1, 1, (N, FEATURES)).astype(np.float32)
        self.y = np.sin(3 * self.x).sum(1).astype(np.float32)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i]), torch.tensor(i, dtype=torch.int64)


def train_step(model, opt, comm, x, y, idx):
    """One step on the global batch whose part on this rank is (x, y, idx);
    returns the batch's global sample indices in global order."""
    params = list(model.parameters())
    grads = []
    for j in range(len(idx)):  # each sample's gradient alone
        model.zero_grad()
        F.mse_loss(model(x[j:j + 1]).squeeze(-1), y[j:j + 1], reduction="sum").backward()
        grads.append(np.concatenate([p.grad.numpy().ravel() for p in params]))
    parts = comm.allgather((idx.tolist(), grads))
    batch = [i for ids, _ in parts for i in ids]
    total = None
    for _, gs in parts:  # global batch order, one addition at a time
        for g in gs:
            total = g.copy() if total is None else total + g
    total /= np.float32(len(batch))
    off = 0
    for p in params:
        p.grad = torch.from_numpy(total[off:off + p.numel()].reshape(p.shape).copy())
        off += p.numel()
    opt.step()
    return batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--stop-after", nargs=2, metavar=("STEPS", "CKPT"))
    ap.add_argument("--save-at", nargs=2, metavar=("STEPS", "CKPT"), help="as --stop-after, but go on")
    ap.add_argument("--resume", metavar="CKPT")
    ap.add_argument("--from-source", action="store_true",
                    help="with --resume: build the dataset from its source, not from CKPT/data")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    save = args.stop_after or args.save_at
    save_at, ckpt = (int(save[0]), save[1]) if save else (None, None)

    # [snippet:pytorch-resume]
    if args.resume and not args.from_source:
        # A later job: the store comes back from the snapshot the stopped
        # job saved (re-sharded over this job's ranks); the source is not read.
        train = DistDataset.from_snapshot(os.path.join(args.resume, "data"), "curves", comm=comm)
    else:
        train = DistDataset(Curves(), "curves", comm=comm, chunk_size=10)
    # The global order depends on (seed, epoch, len(train)) only; each rank
    # takes GLOBAL_BATCH / comm.size samples of every global batch.
    sampler = ResumableBatchSampler(train, GLOBAL_BATCH, seed=SEED, comm=comm)
    loader = ThreadDataLoader(train, batch_sampler=sampler, num_workers=1, prefetch=args.prefetch,
                              reuse_buffers=True)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    order, step, first_epoch = [], 0, 0
    if args.resume:  # a later job, on any number of ranks
        state = torch.load(os.path.join(args.resume, "state.pt"), weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        order, step = list(state["order"]), state["step"]
        first_epoch = state["loader"]["epoch"]

    done = False
    for epoch in range(first_epoch, EPOCHS):
        sampler.set_epoch(epoch)  # the resumed epoch keeps its restored position
        for x, y, idx in loader:
            order.extend(train_step(model, opt, comm, x, y, idx))
            step += 1
            if step == save_at:
                if comm.rank == 0:
                    os.makedirs(ckpt, exist_ok=True)
                comm.Barrier()
                train.save(os.path.join(ckpt, "data"))  # collective: the dataset's snapshot
                state = {"model": model.state_dict(), "optimizer": opt.state_dict(),
                         "loader": loader.state_dict(), "order": order, "step": step}
                if comm.rank == 0:  # the states are the same on every rank
                    torch.save(state, os.path.join(ckpt, "state.pt"))
                if args.stop_after:  # with the next batches' reads in flight
                    done = True
                    break
        if done:
            break

    loader.close()
    comm.Barrier()
    train.ddstore.free()
    # [end-snippet]
    if comm.rank == 0:
        weights = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
        np.savez(args.out, order=np.array(order, np.int64), weights=weights, step=step)

if __name__ == "__main__":
    main()
