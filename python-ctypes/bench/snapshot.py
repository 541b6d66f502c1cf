"""Snapshots in `make bench`: dds_save / dds_load against the disk's own floor.

    mpiexec -n 2 python python-ctypes/bench/snapshot.py --dir build/bench/snap \
        --out build/bench/python.jsonl --append [--mib-per-rank 1024] [--repeats 3]

Every rank holds MIB of 3 KiB rows in one variable. The floor is what the
same ranks get from the same directory without the library, at the same
time: each rank writes its own MIB file with `dd oflag=direct conv=fsync`
(4 MiB blocks) and reads it back with `dd iflag=direct`. Then:

- save: `PyDDStore.save(dir)` of the variable (every rank writes its shard,
  fsync, manifest, atomic rename), timed from a barrier to a barrier;
- load, cold: the snapshot's files are dropped from the page cache
  (posix_fadvise DONTNEED after the save's fsync), then `PyDDStore.load`
  into a fresh store on the same ranks, barrier to barrier; 4096 random
  rows are then read back and compared with the source;
- restart: the time to a usable `pyddstore.torch.DistDataset`, built from
  the source arrays (a map-style dataset of numpy rows, as a job that has
  them in memory would) and with `DistDataset.from_snapshot` from a
  snapshot of that dataset (cold, as a new job finds it).

Figures are aggregate GB/s (all ranks' bytes over the slowest rank's time),
the median of `repeats`, and ratios save / dd write and load / dd read
(goal >= 0.8 for 1 GiB per rank). Records `pysnapshot` in --out,
which scripts/bench-report.py puts in the Python section's targets.
"""

import argparse
import glob
import json
import os
import sys
import shutil
import subprocess
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree's pyddstore first
import pyddstore  # noqa: E402

ROW = 3072
ELEMS = ROW // 8


def evict(paths):
    """Drops the files' pages from the page cache (they were fsynced)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(comm, fn):
    """Seconds of the slowest rank for fn(), started together."""
    comm.Barrier()
    t = time.perf_counter()
    fn()
    t = time.perf_counter() - t
    return comm.allreduce(t, op=MPI.MAX)


def dd(args):
    subprocess.run(["dd", "status=none", "bs=4M"] + args, check=True)


def source_rows(rank, rows):
    """This rank's rows: row g holds g + k / 1000 in element k."""
    first = rank * rows
    g = np.arange(first, first + rows, dtype=np.float64)[:, None]
    return g + np.arange(ELEMS, dtype=np.float64)[None, :] / 1000.0


class Rows:
    """A map-style dataset over a block of rows (the restart's source)."""

    def __init__(self, total, rank, rows):
        self.total, self.first = total, rank * rows
        self.block = source_rows(rank, rows)

    def __len__(self):
        return self.total

    def __getitem__(self, i):
        # Only this rank's share is asked for when DistDataset builds.
        return self.block[i - self.first]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--mib-per-rank", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    rows = a.mib_per_rank * (1 << 20) // ROW
    nbytes = rows * ROW * size
    base = os.path.abspath(a.dir)
    if rank == 0:
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
    comm.Barrier()
    data = source_rows(rank, rows)
    ddfile = os.path.join(base, f"dd.{rank}")
    blocks = a.mib_per_rank // 4
    res = {k: [] for k in ("dd_write", "dd_read", "save", "load")}
    for rep in range(a.repeats):
        res["dd_write"].append(timed(comm, lambda: dd(["if=/dev/zero", f"of={ddfile}", f"count={blocks}",
                                                       "oflag=direct", "conv=fsync"])))
        evict([ddfile])
        res["dd_read"].append(timed(comm, lambda: dd([f"if={ddfile}", "of=/dev/null", "iflag=direct"])))
        snap = os.path.join(base, "snap")
        store = pyddstore.PyDDStore(comm, method=0)
        store.add("x", data)
        res["save"].append(timed(comm, lambda: store.save(snap, ["x"])))
        store.free()
        comm.Barrier()
        evict([p for p in glob.glob(os.path.join(snap, "**"), recursive=True) if os.path.isfile(p)])
        comm.Barrier()
        fresh = pyddstore.PyDDStore(comm, method=0)
        res["load"].append(timed(comm, lambda: fresh.load(snap, ["x"])))
        rng = np.random.default_rng(rep * 131 + rank)
        out = np.empty((1, ELEMS))
        for g in rng.integers(0, rows * size, 4096):
            fresh.get("x", out, int(g))
            want = g + np.arange(ELEMS) / 1000.0
            if not np.array_equal(out[0], want):
                raise SystemExit(f"snapshot bench: row {g} read back wrong after load on rank {rank}")
        fresh.free()
    os.unlink(ddfile)

    # Restart: a DistDataset from its source arrays vs from a snapshot.
    from pyddstore.torch import DistDataset

    src = Rows(rows * size, rank, rows)
    holder = {}
    t_source = timed(comm, lambda: holder.update(ds=DistDataset(src, "bench", comm=comm)))
    dsnap = os.path.join(base, "ds")
    holder["ds"].save(dsnap)
    del holder["ds"]
    comm.Barrier()
    evict([p for p in glob.glob(os.path.join(dsnap, "**"), recursive=True) if os.path.isfile(p)])
    comm.Barrier()
    t_snap = timed(comm, lambda: holder.update(ds=DistDataset.from_snapshot(dsnap, "bench", comm=comm)))
    ds = holder.pop("ds")
    for g in (0, rows * size - 1, rows * size // 2 + 7):
        got = np.asarray(ds[g]).reshape(-1)
        if not np.array_equal(got, g + np.arange(ELEMS) / 1000.0):
            raise SystemExit(f"snapshot bench: sample {g} wrong after from_snapshot")
    del ds
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(base, ignore_errors=True)
        med = {k: float(np.median(v)) for k, v in res.items()}
        gbs = {k: nbytes / v / 1e9 for k, v in med.items()}
        rec = {
            "type": "pysnapshot", "ranks": size, "mib_per_rank": a.mib_per_rank, "repeats": a.repeats,
            "seconds": med, "gb_per_s": gbs,
            "save_over_dd_write": gbs["save"] / gbs["dd_write"],
            "load_over_dd_read": gbs["load"] / gbs["dd_read"],
            "restart_from_source_s": t_source, "restart_from_snapshot_s": t_snap,
        }
        print(f"snapshot, {size} ranks x {a.mib_per_rank} MiB (median of {a.repeats}):")
        for k in ("dd_write", "save", "dd_read", "load"):
            print(f"  {k:9s} {med[k]:7.3f} s  {gbs[k]:6.2f} GB/s")
        print(f"  save / dd write {rec['save_over_dd_write']:.2f}x, load (cold) / dd read "
              f"{rec['load_over_dd_read']:.2f}x (goal >= 0.8)")
        print(f"  restart: DistDataset from the source {t_source:.3f} s, from a snapshot {t_snap:.3f} s")
        if a.out:
            with open(a.out, "a" if a.append else "w") as f:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
