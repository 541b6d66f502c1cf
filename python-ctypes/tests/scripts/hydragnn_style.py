"""A HydraGNN-DistDataset-style program, written the way HydraGNN uses
DDStore's pyddstore (nothing in it knows about libddstore). Run:

    mpiexec -n 4 python hydragnn_style.py

Each dataset packs its pickled samples into one 1-D uint8 variable, with the
byte count and global byte offset of every sample in two int64 variables, plus
ragged float32 node features as rows of an N-D variable. Three datasets (three
stores) live at once on a split sub-communicator; every batch is read between
epoch_begin() and epoch_end(); the stores are freed from __del__.
Exits non-zero (on every rank) if any sample reads back wrong.
"""

import os
import pickle
import sys

import numpy as np
from mpi4py import MPI

try:
    import pyddstore as dds
except ImportError:
    dds = None

NFEAT = 6


def make_sample(i):
    """Deterministic sample i: a graph with i % 5 + 1 nodes."""
    n = i % 5 + 1
    x = (np.full((n, NFEAT), i) + np.arange(NFEAT)).astype(np.float32)
    return {"id": i, "y": float(i) * 0.5, "x": x}


class DistDataset:
    def __init__(self, data, label, comm=MPI.COMM_WORLD, ddstore_width=None):
        self.label = label
        self.comm = comm
        self.rank = comm.Get_rank()
        self.comm_size = comm.Get_size()
        self.ddstore_width = ddstore_width if ddstore_width is not None else self.comm_size
        self.ddstore_comm = self.comm.Split(self.rank // self.ddstore_width, self.rank)
        self.ddstore_comm_rank = self.ddstore_comm.Get_rank()
        self.ddstore_comm_size = self.ddstore_comm.Get_size()
        method = int(os.getenv("HYDRAGNN_DDSTORE_METHOD", "0"))
        if method == 0:
            self.ddstore = dds.PyDDStore(self.ddstore_comm)
        else:
            self.ddstore = dds.PyDDStore(self.ddstore_comm, method=method)

        # Samples: pickled bytes, all concatenated.
        blobs = [pickle.dumps({"id": s["id"], "y": s["y"]}) for s in data]
        sizes = np.array([len(b) for b in blobs], dtype=np.int64)
        base = self.ddstore_comm.exscan(int(sizes.sum())) or 0
        offsets = base + np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        packed = np.frombuffer(b"".join(blobs), dtype=np.uint8)  # read-only view is fine for add
        self.ddstore.add(f"{label}/obj", packed)
        self.ddstore.add(f"{label}/obj/variable_count", sizes)
        self.ddstore.add(f"{label}/obj/variable_offset", offsets)

        # Node features: rows of an (N_nodes, NFEAT) float32 variable.
        nodes = [s["x"].shape[0] for s in data]
        xrow = self.ddstore_comm.exscan(int(sum(nodes))) or 0
        xoff = xrow + np.concatenate(([0], np.cumsum(nodes)[:-1])).astype(np.int64)
        self.ddstore.add(f"{label}/x", np.concatenate([s["x"] for s in data]))
        self.ddstore.add(f"{label}/x/variable_count", np.array(nodes, dtype=np.int64))
        self.ddstore.add(f"{label}/x/variable_offset", xoff)

        self.total_ns = self.ddstore_comm.allreduce(len(data))

    def len(self):
        return self.total_ns

    def __len__(self):
        return self.len()

    def get(self, idx):
        count = np.zeros(1, dtype=np.int64)
        offset = np.zeros(1, dtype=np.int64)
        self.ddstore.get(f"{self.label}/obj/variable_count", count, idx)
        self.ddstore.get(f"{self.label}/obj/variable_offset", offset, idx)
        buf = np.zeros(count[0], dtype=np.uint8)
        self.ddstore.get(f"{self.label}/obj", buf, offset[0])
        sample = pickle.loads(buf.tobytes())
        self.ddstore.get(f"{self.label}/x/variable_count", count, idx)
        self.ddstore.get(f"{self.label}/x/variable_offset", offset, idx)
        x = np.zeros((count[0], NFEAT), dtype=np.float32)
        self.ddstore.get(f"{self.label}/x", x, offset[0])
        sample["x"] = x
        return sample

    def __getitem__(self, idx):
        return self.get(idx)

    def __del__(self):
        if hasattr(self, "ddstore"):
            self.ddstore.free()


def main():
    if dds is None:
        print("pyddstore is not importable", file=sys.stderr)
        return 1
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    width = 2 if size >= 4 else None
    group_first = (rank // width) * width if width else 0
    group_size = min(width, size - group_first) if width else size

    datasets = {}
    for label, per_rank in (("trainset", 23), ("valset", 7), ("testset", 5)):
        # Within each group, rank r holds samples [r*per_rank, (r+1)*per_rank) of the group.
        mine = range((rank - group_first) * per_rank, (rank - group_first + 1) * per_rank)
        datasets[label] = DistDataset([make_sample(i) for i in mine], label, comm, ddstore_width=width)

    errors = 0
    rng = np.random.default_rng(rank)
    for label, ds in datasets.items():
        n = len(ds)
        errors += n != group_size * {"trainset": 23, "valset": 7, "testset": 5}[label]
        order = rng.permutation(n).astype(np.int64)
        for batch in np.array_split(order, max(1, n // 8)):
            ds.ddstore.epoch_begin()
            for idx in batch:  # numpy.int64, passed positionally
                got, want = ds[idx], make_sample(int(idx))
                errors += got["id"] != want["id"] or got["y"] != want["y"]
                errors += not np.array_equal(got["x"], want["x"])
            ds.ddstore.epoch_end()

    del datasets["trainset"]  # freed from __del__ while the others stay alive
    ds = datasets["valset"]
    ds.ddstore.epoch_begin()
    errors += ds[len(ds) - 1]["id"] != len(ds) - 1
    ds.ddstore.epoch_end()

    total = comm.allreduce(errors)
    if rank == 0:
        print(f"hydragnn-style: {size} ranks, {total} errors")
    return 1 if total else 0


if __name__ == "__main__":
    status = main()  # valset and testset are freed when main's locals go
    sys.exit(status)
