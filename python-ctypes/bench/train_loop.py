"""A training loop's epochs through pyddstore against the in-memory limit (issue 40).

    mpiexec -n 2 python python-ctypes/bench/train_loop.py [--out build/bench/python.jsonl --append]
        [--quick] [--cases 3KiB,12.5KiB,200KiB,ragged] [--steps-ms 0,read,4] [--repeats 7]
        [--prefetch 2] [--batch 128] [--samples N]

A map-style dataset of N samples whose content is a function of the index,
read by a DistributedSampler (shuffled, padded so every rank steps the same
number of times) in batches of `--batch` per rank; each step of the training
loop sleeps T (a GPU step that leaves the CPU free). Cases: fixed rows of
3 KiB, 12.5 KiB and 200 KiB (float32), and "ragged", graph-like samples
(x [n, 16] float32 with n 8-60, edge_index [2, e] int64 with e 2n-4n, y [1]).
Loaders, all alive at once, the repeats of every (case, T) cell run in turn
(loader after loader, `--repeats` times):

- `memory`, the in-memory limit: every rank holds the whole dataset in torch
  tensors; a plain DataLoader (num_workers=0) over a dataset that indexes them;
- `m0 collective pfK`, `m0 onesided pfK`, `m1 pfK`: pyddstore.torch's
  DistDataset (ragged: RaggedDataset) + ThreadDataLoader (num_workers=0: one
  loader thread) over method 0 in each batch mode and method 1 (libfabric,
  DDSTORE_FABRIC, default shm); pfK is the loader's `prefetch=K`: with K > 0
  the reads of the next K batches are started ahead from the loop's thread,
  with K = 0 the loader thread fetches up to 2 batches ahead (read, then
  collate). RaggedDataset has no started reads: its loaders run pf0 only.
  With the default collate, ThreadDataLoader makes each batch from the read
  buffers (one tensor per field); `m0 onesided pfK per-sample` is the same
  loader with a collate_fn that only calls default_collate, so it makes
  the samples and collates them (what the batch path saves, in the same run);
- `memmap`: a plain DataLoader with 2 worker processes (persistent) over
  np.memmap files that the ranks wrote to a temporary directory (each rank
  its share; the usual alternative without a store).

Every batch is checked against the source (4 columns of every sample and one
whole sample per batch; ragged: every graph's sizes, y, first and last
feature, one whole graph): a wrong sample aborts the run (MPI_Abort, exit
status non-zero). Before the timed epochs each loader runs one untimed epoch
(worker start-up, first touches), and the checker is shown to refuse a
corrupted copy of a batch.

Per cell (medians over the repeats; times of the slowest rank): time per
epoch, samples per second (all ranks), data wait per step (time blocked in
next() of the loader, largest rank mean), and per loader: memory per rank
(VmRSS delta around building the dataset, each side taken after gc and
malloc_trim, largest over ranks; it includes the
store's shared-memory shard; memmap: the file's bytes / P, as its pages are
the page cache's, shared by the ranks) and the time to build the dataset from
the same per-sample source (barrier to barrier; for a store, beside the time
to make an empty store of its kind, timed first); each also as a ratio to
`memory`. T "read" is the median blocking read of one batch (m0 onesided
get_batch of every field), measured per case before the epochs. Then where a
batch's time goes without overlap: the read alone, the read with the samples
made (`__getitems__`), the default collate, the read as the loader's batch
(fixed rows), and the in-memory loader's sample list and collate; and the
blocking read of one batch through each store.

Records (rank 0): `pytrainmeta`, `pytrain` (one per case, T and loader),
`pytrainparts` (one per case), `pyskip`; scripts/bench-report.py turns them
into the training-loop table of docs/dev/results.md.
"""

import argparse
import ctypes
import gc
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch  # before mpi4py, as pyddstore.torch wants
from torch.utils.data import DataLoader, Dataset, DistributedSampler, default_collate
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree's pyddstore first
import pyddstore  # noqa: E402
from pyddstore.torch import DistDataset, RaggedDataset, ThreadDataLoader  # noqa: E402

_perf = time.perf_counter
try:
    _libc = ctypes.CDLL("libc.so.6")
except OSError:  # not glibc: no trim
    _libc = None
MOD = 65521  # row values stay exact in float32
CASES = {"3KiB": 3072, "12.5KiB": 12800, "200KiB": 204800, "ragged": None}
SAMPLES = {"3KiB": 8192, "12.5KiB": 4096, "200KiB": 1024, "ragged": 4096}
QUICK_SAMPLES = {"3KiB": 512, "12.5KiB": 256, "200KiB": 64, "ragged": 256}
NFEAT = 16


class WrongSample(Exception):
    pass


# ---------------------------------------------------------------------------
# The source: sample i is a function of i.

def row_values(i, width):
    return ((i * 131 + np.arange(width, dtype=np.int64)) % MOD).astype(np.float32)


def graph_sizes(i):
    n = 8 + (i * 37) % 53
    return n, 2 * n + (i * 11) % (2 * n + 1)


def graph(i):
    n, e = graph_sizes(i)
    x = ((i * 131 + np.arange(n * NFEAT, dtype=np.int64)) % MOD).astype(np.float32).reshape(n, NFEAT)
    ei = ((i + np.arange(2 * e, dtype=np.int64)) % n).reshape(2, e)
    return {"x": torch.from_numpy(x), "edge_index": torch.from_numpy(ei),
            "y": torch.tensor([float(i)], dtype=torch.float32)}


class RowSource(Dataset):
    """What every loader is built from, sample by sample."""

    def __init__(self, n, width):
        self.n, self.width = n, width

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.from_numpy(row_values(int(i), self.width))


def graph_collate(samples):
    """A PyG-style batch: features and edges concatenated, edges shifted."""
    ns = [s["x"].shape[0] for s in samples]
    offs = np.concatenate([[0], np.cumsum(ns)[:-1]])
    return {"x": torch.cat([s["x"] for s in samples]),
            "edge_index": torch.cat([s["edge_index"] + int(o) for s, o in zip(samples, offs)], 1),
            "y": torch.cat([s["y"] for s in samples]),
            "n": torch.tensor(ns), "e": torch.tensor([s["edge_index"].shape[1] for s in samples])}


# ---------------------------------------------------------------------------
# Checks of a batch against the source.

def check_rows(batch, idx, width, rng):
    b = batch.numpy() if isinstance(batch, torch.Tensor) else np.asarray(batch)
    if b.shape != (len(idx), width):
        raise WrongSample(f"batch shape {b.shape}, expected {(len(idx), width)}")
    cols = np.array([0, width // 2, width - 1, int(rng.integers(width))])
    want = ((idx[:, None] * 131 + cols[None, :]) % MOD).astype(np.float32)
    if not np.array_equal(b[:, cols], want):
        bad = int(np.nonzero((b[:, cols] != want).any(1))[0][0])
        raise WrongSample(f"sample {int(idx[bad])} (position {bad} of the batch) differs from the source")
    k = int(rng.integers(len(idx)))
    if not np.array_equal(b[k], row_values(int(idx[k]), width)):
        raise WrongSample(f"sample {int(idx[k])} (position {k}) differs from the source in full")


def check_graphs(batch, idx, rng):
    sizes = np.array([graph_sizes(int(i)) for i in idx])
    if not (np.array_equal(batch["n"].numpy(), sizes[:, 0]) and np.array_equal(batch["e"].numpy(), sizes[:, 1])):
        raise WrongSample("graph sizes differ from the source")
    if not np.array_equal(batch["y"].numpy(), idx.astype(np.float32)):
        raise WrongSample("y differs from the source (wrong samples or order)")
    x = batch["x"].numpy()
    starts = np.concatenate([[0], np.cumsum(sizes[:, 0])[:-1]])
    ends = starts + sizes[:, 0] - 1
    if not (np.array_equal(x[starts, 0], ((idx * 131) % MOD).astype(np.float32))
            and np.array_equal(x[ends, NFEAT - 1], ((idx * 131 + sizes[:, 0] * NFEAT - 1) % MOD).astype(np.float32))):
        raise WrongSample("node features differ from the source")
    k = int(rng.integers(len(idx)))
    g = graph(int(idx[k]))
    eo = int(np.sum(sizes[:k, 1]))
    edges = batch["edge_index"].numpy()[:, eo:eo + sizes[k, 1]] - starts[k]
    if not (np.array_equal(x[starts[k]:starts[k] + sizes[k, 0]], g["x"].numpy())
            and np.array_equal(edges, g["edge_index"].numpy())):
        raise WrongSample(f"graph {int(idx[k])} (position {k}) differs from the source in full")


def corrupted(batch):
    """A copy of `batch` with one value changed (the checker must refuse it)."""
    if isinstance(batch, dict):
        b = {k: v.clone() for k, v in batch.items()}
        b["y"][-1] += 1
        return b
    b = batch.clone()
    b[-1, 0] += 1
    return b


def swapped(batch):
    """A copy with the first two samples exchanged."""
    if isinstance(batch, dict):
        b = {k: v.clone() for k, v in batch.items()}
        b["y"][[0, 1]] = b["y"][[1, 0]]
        return b
    return batch[[1, 0] + list(range(2, batch.shape[0]))].clone()


# ---------------------------------------------------------------------------
# The in-memory limit and the memmap alternative.

class InMemory(Dataset):
    def __init__(self, source):
        # Filled in place: no list of rows whose freed heap would stay in VmRSS.
        self.t = torch.empty((len(source), source.width), dtype=torch.float32)
        for i in range(len(source)):
            self.t[i] = source[i]

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        return self.t[i]


class InMemoryGraphs(Dataset):
    def __init__(self, n):
        gs = [graph(i) for i in range(n)]
        self.x = torch.cat([g["x"] for g in gs])
        self.ei = torch.cat([g["edge_index"] for g in gs], 1)
        self.y = torch.cat([g["y"] for g in gs])
        self.xo = np.concatenate([[0], np.cumsum([g["x"].shape[0] for g in gs])])
        self.eo = np.concatenate([[0], np.cumsum([g["edge_index"].shape[1] for g in gs])])

    def __len__(self):
        return self.y.shape[0]

    def __getitem__(self, i):
        return {"x": self.x[self.xo[i]:self.xo[i + 1]], "edge_index": self.ei[:, self.eo[i]:self.eo[i + 1]],
                "y": self.y[i:i + 1]}


def write_share(path, dtype, shape, lo, values, comm):
    """Rank 0 makes the file, then every rank writes its rows [lo, lo + len)."""
    if comm.Get_rank() == 0:
        np.lib.format.open_memmap(path, "w+", dtype, shape).flush()
    comm.Barrier()
    if len(values):
        mm = np.load(path, mmap_mode="r+")
        mm[lo:lo + len(values)] = values
        mm.flush()
        del mm


class MemmapRows(Dataset):
    """Rows of an .npy file, opened in each worker process."""

    def __init__(self, path, n):
        self.path, self.n, self.mm = path, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.mm is None:
            self.mm = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.mm[i]))


class MemmapGraphs(Dataset):
    def __init__(self, d, n):
        self.d, self.n, self.mm = d, n, None
        sizes = np.array([graph_sizes(i) for i in range(n)])
        self.xo = np.concatenate([[0], np.cumsum(sizes[:, 0])])
        self.eo = np.concatenate([[0], np.cumsum(sizes[:, 1])])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.mm is None:
            self.mm = [np.load(os.path.join(self.d, f), mmap_mode="r") for f in ("x.npy", "ei.npy")]
        x, ei = self.mm
        return {"x": torch.from_numpy(np.array(x[self.xo[i]:self.xo[i + 1]])),
                "edge_index": torch.from_numpy(np.array(ei[:, self.eo[i]:self.eo[i + 1]])),
                "y": torch.tensor([float(i)], dtype=torch.float32)}


def build_memmap(case, n, width, d, comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    lo, hi = n * rank // size, n * (rank + 1) // size
    if width is not None:
        path = os.path.join(d, "rows.npy")
        src = RowSource(n, width)
        vals = np.stack([src[i].numpy() for i in range(lo, hi)]) if hi > lo else np.zeros((0, width), np.float32)
        write_share(path, np.float32, (n, width), lo, vals, comm)
        comm.Barrier()
        return MemmapRows(path, n), n * width * 4
    ds = MemmapGraphs(d, n)
    gs = [graph(i) for i in range(lo, hi)]
    x = torch.cat([g["x"] for g in gs]).numpy() if gs else np.zeros((0, NFEAT), np.float32)
    write_share(os.path.join(d, "x.npy"), np.float32, (int(ds.xo[-1]), NFEAT), int(ds.xo[lo]), x, comm)
    ei = torch.cat([g["edge_index"] for g in gs], 1).numpy() if gs else np.zeros((2, 0), np.int64)
    # edge_index is [2, E]: each rank writes its columns.
    if rank == 0:
        np.lib.format.open_memmap(os.path.join(d, "ei.npy"), "w+", np.int64, (2, int(ds.eo[-1]))).flush()
    comm.Barrier()
    if ei.shape[1]:
        mm = np.load(os.path.join(d, "ei.npy"), mmap_mode="r+")
        mm[:, int(ds.eo[lo]):int(ds.eo[lo]) + ei.shape[1]] = ei
        mm.flush()
        del mm
    comm.Barrier()
    return ds, int(ds.xo[-1]) * NFEAT * 4 + int(ds.eo[-1]) * 16


# ---------------------------------------------------------------------------

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [None] * 3


class Loader:
    """One loader of the comparison: its dataset, how it was built, its DataLoader."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind
        self.dataset = self.loader = self.sampler = None
        self.mem = self.build_s = None
        self.owned = []  # stores to free at the end of the case


def abort(comm, msg):
    sys.stderr.write(f"train_loop.py, rank {comm.Get_rank()}: {msg}\n")
    sys.stderr.flush()
    comm.Abort(3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="JSON lines file for the records (rank 0 writes)")
    ap.add_argument("--append", action="store_true", help="add to --out instead of replacing it")
    ap.add_argument("--quick", action="store_true",
                    help="tiny datasets, T=0, one repeat, every loader (a functional test)")
    ap.add_argument("--cases", help="among " + ",".join(CASES) + " (default: all; --quick: 3KiB,ragged, as the "
                    "other row sizes take the same path)")
    ap.add_argument("--steps-ms", default="0,read,4",
                    help="step times T in ms; 'read' is the measured blocking read of one batch")
    ap.add_argument("--repeats", type=int, default=7, help="timed epochs per cell and loader (median)")
    ap.add_argument("--prefetch", type=int, default=2, help="K of the pfK loaders")
    ap.add_argument("--batch", type=int, default=128, help="samples per batch per rank")
    ap.add_argument("--samples", type=int, help="N for every case (default: per case)")
    ap.add_argument("--loaders", help="comma-separated subset of the loader names (default: all)")
    ap.add_argument("--corrupt", metavar="LOADER",
                    help="testing aid: LOADER's batches get one wrong value (the run must abort)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    os.environ.setdefault("DDSTORE_FABRIC", "shm")  # method 1's provider, read when its store is made
    torch.set_num_threads(1)
    if a.quick:
        a.steps_ms, a.repeats = "0", 1
    if a.cases is None:
        a.cases = "3KiB,ragged" if a.quick else ",".join(CASES)
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r}; the cases are {', '.join(CASES)}")
    steps = a.steps_ms.split(",")
    for s in steps:
        if s != "read":
            float(s)
    wanted = set(a.loaders.split(",")) if a.loaders else None
    t_start = time.time()
    out = None
    if rank == 0 and a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        out = open(a.out, "a" if a.append else "w")
        out.write(json.dumps({
            "type": "pytrainmeta", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ranks": size,
            "batch": a.batch, "repeats": a.repeats, "prefetch": a.prefetch, "quick": a.quick,
            "torch": torch.__version__, "loadavg_start": loadavg(), "cpus": os.cpu_count(),
            "fabric": os.environ.get("DDSTORE_FABRIC")}) + "\n")
        out.flush()
    tmp = comm.bcast(tempfile.mkdtemp(prefix="ddstore-trainbench-") if rank == 0 else None, root=0)
    try:
        for case in cases:
            run_case(a, comm, case, steps, wanted, tmp, out)
    finally:
        comm.Barrier()
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
    if out is not None:
        out.write(json.dumps({"type": "pytrainend", "seconds": round(time.time() - t_start, 1),
                              "loadavg_end": loadavg()}) + "\n")
        out.close()
    if rank == 0:
        print(f"train_loop.py: every batch of every loader verified; {time.time() - t_start:.1f} s")


def settled_rss():
    """VmRSS once garbage is collected, the heap trimmed and the figure still
    (threads of the previous case's loaders exit in the background): what
    the process holds, not what its allocator keeps for later."""
    prev = None
    for _ in range(20):
        gc.collect()
        if _libc is not None:
            _libc.malloc_trim(0)
        r = rss()
        if prev is not None and abs(r - prev) < (1 << 20):
            break
        prev = r
        time.sleep(0.05)
    return r


def timed_build(comm, fn):
    """(result, seconds of the slowest rank, largest VmRSS delta of any rank).
    The time is the build's; the memory is what it left held (settled_rss)."""
    r0 = settled_rss()
    comm.Barrier()
    t = _perf()
    res = fn()
    comm.Barrier()
    t = _perf() - t
    return res, comm.allreduce(t, op=MPI.MAX), comm.allreduce(settled_rss() - r0, op=MPI.MAX)


PER_SAMPLE = "per-sample"


def samples_collate(samples):
    """default_collate behind another function: ThreadDataLoader then makes
    the samples and collates them, as with any custom collate_fn."""
    return default_collate(samples)


def run_case(a, comm, case, steps, wanted, tmp, out):
    rank, size = comm.Get_rank(), comm.Get_size()
    width_bytes = CASES[case]
    ragged = width_bytes is None
    width = None if ragged else width_bytes // 4
    n = a.samples or (QUICK_SAMPLES if a.quick else SAMPLES)[case]
    if n < size * a.batch and not a.quick:
        raise SystemExit(f"--samples {n}: fewer than one batch per rank")
    collate = graph_collate if ragged else default_collate
    rng = np.random.default_rng(1234 + rank)
    pfs = [0] if ragged else sorted({0, a.prefetch})
    specs = [("memory", "memory", None, None, None)]
    for m, bm in ((0, "collective"), (0, "onesided"), (1, None)):
        for pf in pfs:
            specs.append((f"m{m} {bm + ' ' if bm else ''}pf{pf}", "store", m, bm, pf))
        if m == 0 and bm == "onesided" and not ragged and a.prefetch:
            # The same loader made to take the per-sample path (samples, then
            # default_collate): what the batch from the read buffers saves.
            specs.append((f"m0 onesided pf{a.prefetch} {PER_SAMPLE}", "store", m, bm, a.prefetch))
    specs.append(("memmap", "memmap", None, None, None))
    if wanted is not None:
        specs = [s for s in specs if s[0] in wanted or s[0] == "memory"]
    rss_start = settled_rss()
    loaders, skips = [], []
    stores = {}  # (method, batch mode) -> (dataset, build_s, mem): pf0 and pfK share one
    create_s = {}  # (method, batch mode) -> seconds to make an empty store of that kind
    d = os.path.join(tmp, case.replace(".", "_"))
    if rank == 0:
        os.makedirs(d)
    comm.Barrier()
    for name, kind, m, bm, pf in specs:
        L = Loader(name, kind)
        if kind == "memory":
            L.dataset, L.build_s, L.mem = timed_build(
                comm, lambda: InMemoryGraphs(n) if ragged else InMemory(RowSource(n, width)))
        elif kind == "memmap":
            (L.dataset, fbytes), L.build_s, _ = timed_build(comm, lambda: build_memmap(case, n, width, d, comm))
            L.mem = fbytes / size
        else:
            key = (m, bm)
            if key not in stores:
                def make():
                    vname = f"{case}/m{m}{bm or ''}"
                    if ragged:
                        lo, hi = n * rank // size, n * (rank + 1) // size
                        local = [graph(i) for i in range(lo, hi)]
                        kw = {"batch_mode": bm} if m == 0 else {}
                        return RaggedDataset(local, vname, comm, method=m,
                                             ragged={"x": 0, "edge_index": 1}, **kw)
                    return DistDataset(RowSource(n, width), vname, comm=comm, method=m,
                                       batch_mode=bm if m == 0 else None, prefetch=a.prefetch)
                try:
                    # Where a store's build time goes: an empty store of the
                    # same kind, made and freed first (its fixed cost).
                    comm.Barrier()
                    t = _perf()
                    empty = pyddstore.PyDDStore(comm, method=m, **({"batch_mode": bm} if m == 0 else {}))
                    comm.Barrier()
                    create_s[key] = round(comm.allreduce(_perf() - t, op=MPI.MAX), 4)
                    empty.free()
                    stores[key] = timed_build(comm, make)
                except pyddstore.UnsupportedError as exc:
                    stores[key] = exc
            got = stores[key]
            if isinstance(got, Exception):
                skips.append((name, f"{type(got).__name__}: {got}"))
                continue
            L.dataset, L.build_s, L.mem = got
            L.pf, L.create_s = pf, create_s[key]
        L.sampler = DistributedSampler(L.dataset, num_replicas=size, rank=rank, shuffle=True, seed=7)
        if kind == "memory":
            L.loader = DataLoader(L.dataset, batch_size=a.batch, sampler=L.sampler, num_workers=0,
                                  collate_fn=collate)
        elif kind == "memmap":
            L.loader = DataLoader(L.dataset, batch_size=a.batch, sampler=L.sampler, num_workers=2,
                                  persistent_workers=True, prefetch_factor=2, collate_fn=collate,
                                  multiprocessing_context="fork")
        else:
            per_sample = name.endswith(PER_SAMPLE)
            L.loader = ThreadDataLoader(L.dataset, batch_size=a.batch, sampler=L.sampler, num_workers=0,
                                        prefetch=L.pf, collate_fn=samples_collate if per_sample else collate)
        loaders.append(L)
    if out is not None:
        for name, why in skips:
            out.write(json.dumps({"type": "pyskip", "group": f"train_loop {case} {name}", "reason": why}) + "\n")

    def check(L, batch, idx):
        if a.corrupt == L.name:
            batch = corrupted(batch)
        try:
            if ragged:
                check_graphs(batch, idx, rng)
            else:
                check_rows(batch, idx, width, rng)
        except WrongSample as exc:
            abort(comm, f"{case}, loader {L.name}: {exc}")

    def epoch(L, ep, step_s):
        """(seconds, data wait per step) of one epoch on this rank; every batch checked."""
        L.sampler.set_epoch(ep)
        order = np.fromiter(iter(L.sampler), np.int64)
        batches = [order[j:j + a.batch] for j in range(0, len(order), a.batch)]
        comm.Barrier()
        wait = checking = 0.0
        t0 = _perf()
        it = iter(L.loader)
        for idx in batches:
            tw = _perf()
            batch = next(it)
            tc = _perf()
            wait += tc - tw
            check(L, batch, idx)
            checking += _perf() - tc
            if step_s:
                time.sleep(step_s)
        try:
            next(it)
            abort(comm, f"{case}, loader {L.name}: more batches than the sampler's")
        except StopIteration:
            pass
        return _perf() - t0 - checking, wait / len(batches), len(batches), batch

    # Untimed epoch per loader; then the checker must refuse wrong copies of a batch.
    for L in loaders:
        _, _, nsteps, last = epoch(L, 0, 0.0)
        order = np.fromiter(iter(L.sampler), np.int64)
        idx = order[(nsteps - 1) * a.batch:]
        for bad in (corrupted(last), swapped(last)):
            try:
                (check_graphs(bad, idx, rng) if ragged else check_rows(bad, idx, width, rng))
            except WrongSample:
                continue
            abort(comm, f"{case}: the checker accepted a corrupted batch of {L.name}")

    # T = "read": the median blocking read of one batch (every field).
    probe = next((L for L in loaders if L.name.startswith("m0 onesided")), None) or \
        next((L for L in loaders if L.kind == "store"), None)
    read_s = None
    parts = {}
    if probe is not None:
        ds = probe.dataset
        reads, items, colls, batches = [], [], [], []
        for _ in range(3 if a.quick else 21):
            idx = rng.integers(0, n, a.batch)
            t = _perf()
            if ragged:
                for key in ds.schema:
                    ds._field(key, idx)
            else:
                ds.read_rows(idx)
            reads.append(_perf() - t)
            if not ragged:  # ThreadDataLoader's batch with the default collate
                t = _perf()
                ds._getitems_collated(idx)
                batches.append(_perf() - t)
            t = _perf()
            samples = ds.__getitems__(idx)
            items.append(_perf() - t)
            t = _perf()
            collate(samples)
            colls.append(_perf() - t)
        mem = loaders[0].dataset
        mlists, mcolls = [], []
        for _ in range(3 if a.quick else 21):
            idx = rng.integers(0, n, a.batch)
            t = _perf()
            samples = [mem[int(i)] for i in idx]
            mlists.append(_perf() - t)
            t = _perf()
            collate(samples)
            mcolls.append(_perf() - t)
        parts = {"loader": probe.name, "read_ms": np.median(reads) * 1e3, "getitems_ms": np.median(items) * 1e3,
                 "collate_ms": np.median(colls) * 1e3, "memory_samples_ms": np.median(mlists) * 1e3,
                 "memory_collate_ms": np.median(mcolls) * 1e3}
        if batches:
            parts["batch_ms"] = np.median(batches) * 1e3
        parts = {k: (round(float(comm.allreduce(float(v), op=MPI.MAX)), 4) if not isinstance(v, str) else v)
                 for k, v in parts.items()}
        read_s = parts["read_ms"] / 1e3
        # The same blocking read through every store (the collective mode's
        # read waits for the other rank's).
        parts["store_read_ms"] = {}
        for L in loaders:
            if L.kind != "store" or not L.name.endswith(" pf0"):
                continue
            ts = []
            for _ in range(3 if a.quick else 21):
                idx = rng.integers(0, n, a.batch)
                t = _perf()
                if ragged:
                    for key in L.dataset.schema:
                        L.dataset._field(key, idx)
                else:
                    L.dataset.read_rows(idx)
                ts.append(_perf() - t)
            parts["store_read_ms"][L.name[:-4]] = round(float(comm.allreduce(float(np.median(ts)), op=MPI.MAX)) * 1e3,
                                                        4)
    step_list = []
    for s in steps:
        if s == "read":
            if read_s is not None:
                step_list.append(("read", read_s))
        else:
            step_list.append((s, float(s) / 1e3))

    ep = 1
    results = {}
    for tname, step_s in step_list:
        for rep in range(a.repeats):
            # Alternate the order too, so no loader always follows the same one.
            seq = loaders if rep % 2 == 0 else loaders[::-1]
            for L in seq:
                t, w, nsteps, _ = epoch(L, ep, step_s)
                t, w = comm.allreduce(t, op=MPI.MAX), comm.allreduce(w, op=MPI.MAX)
                results.setdefault((tname, L.name), []).append((t, w, nsteps))
            ep += 1
    comm.Barrier()

    if rank == 0:
        mem0 = loaders[0]
        print(f"{case}: N={n}, {size} ranks, batch {a.batch}/rank, T in ms: "
              + ", ".join(f"{t} = {s * 1e3:.3f}" for t, s in step_list)
              + f"; VmRSS of rank 0 before the case {rss_start / 2**20:.0f} MiB")
        if parts:
            batch = f", read as a batch {parts['batch_ms']:.3f} ms" if "batch_ms" in parts else ""
            print(f"  one batch without overlap ({parts['loader']}): read {parts['read_ms']:.3f} ms, read + samples "
                  f"{parts['getitems_ms']:.3f} ms, collate {parts['collate_ms']:.3f} ms{batch}; memory: samples "
                  f"{parts['memory_samples_ms']:.3f} ms, collate {parts['memory_collate_ms']:.3f} ms; read by store: "
                  + ", ".join(f"{k} {v:.3f} ms" for k, v in parts["store_read_ms"].items()))
        print(f"  {'T':>8s} {'loader':26s} {'epoch s':>8s} {'x mem':>6s} {'samples/s':>10s} {'wait ms':>8s} "
              f"{'mem MiB':>8s} {'x mem':>6s} {'build s':>8s} {'x mem':>6s}")
        for tname, step_s in step_list:
            base = None
            for L in loaders:
                rs = results[(tname, L.name)]
                t = float(np.median([r[0] for r in rs]))
                w = float(np.median([r[1] for r in rs]))
                nsteps = rs[0][2]
                sps = nsteps * a.batch * size / t
                if base is None:
                    base = (t, w, sps)
                rec = {"type": "pytrain", "case": case, "row_bytes": width_bytes, "samples": n, "ranks": size,
                       "batch": a.batch, "steps": nsteps, "step": tname, "step_ms": round(step_s * 1e3, 4),
                       "loader": L.name, "repeats": a.repeats, "epoch_s": round(t, 5),
                       "epoch_s_all": [round(r[0], 5) for r in rs], "samples_per_s": round(sps, 1),
                       "wait_ms": round(w * 1e3, 4), "mem_bytes": int(L.mem),
                       "mem_how": "file bytes / P (page cache)" if L.kind == "memmap" else "VmRSS delta",
                       "build_s": round(L.build_s, 4), "store_create_s": getattr(L, "create_s", None),
                       "ratio": {"epoch": round(t / base[0], 4), "samples_per_s": round(sps / base[2], 4),
                                 "wait": round(w / base[1], 4) if base[1] > 0 else None,
                                 "mem": round(L.mem / mem0.mem, 4) if mem0.mem > 0 else None,
                                 "build": round(L.build_s / mem0.build_s, 4)},
                       "verified": True}
                print(f"  {tname:>8s} {L.name:26s} {t:8.3f} {t / base[0]:6.2f} {sps:10.0f} {w * 1e3:8.3f} "
                      f"{L.mem / 2**20:8.1f} {rec['ratio']['mem'] or 0:6.2f} {L.build_s:8.3f} "
                      f"{rec['ratio']['build']:6.2f}")
                if out is not None:
                    out.write(json.dumps(rec) + "\n")
        if out is not None and parts:
            out.write(json.dumps({"type": "pytrainparts", "case": case, "row_bytes": width_bytes, "ranks": size,
                                  "batch": a.batch, **parts}) + "\n")
            out.flush()
        sys.stdout.flush()

    # Release: loader threads and workers, then the stores (collective).
    for L in loaders:
        if isinstance(L.loader, ThreadDataLoader):
            L.loader.close()
        elif getattr(L.loader, "_iterator", None) is not None:  # persistent workers
            L.loader._iterator._shutdown_workers()
        L.loader = L.dataset = L.sampler = None
    for got in stores.values():
        if isinstance(got, Exception):
            continue
        ds = got[0]
        if ragged:
            ds.free()
        else:
            ds.ddstore.free()
            ds.ddstore_comm.Free()
    stores.clear()
    loaders.clear()
    comm.Barrier()


if __name__ == "__main__":
    main()
