"""The Python section of `make bench`: pyddstore reads into numpy arrays.

    mpiexec -n 2 python python-ctypes/bench/bench.py --out build/bench/python.jsonl
        [--quick] [--sizes B,B,...] [--repeats N] [--min-repeat-ms MS] [--shard-mib MIB]
        [--groups mpi,mpi+local,...] [--overlap-only --append] [--single-only]

What capi-tests/bench measures through the C API, measured again through
pyddstore, in the same `make bench` run, so that scripts/bench-report.py can
put the two side by side (ratios Python / C): `get` of one row and
`get_batch` of 128 rows, into a reused numpy array, a fresh one per call
(`numpy.empty`) and one registered with `register_recv`, for the four row
sizes, on the store variants of the C bench that Python users meet (method
0 and method 1 on shm, node-local reads off and on; the group labels are the
C bench's). Every rank reads uniformly random global rows at the same time;
a figure is microseconds per row per rank: rank 0's median over `repeats`
timed repeats of at least `min-repeat-ms` each (min and max beside it) and
the largest median of any rank. Beside each pyddstore path, the same call
is made "direct": straight to dds_get / dds_get_batch through cffi with the
arguments ready, into the same kind of destination. The node-local off and
on stores of a pair are alive together, and the repeats of all four paths
(off and on, pyddstore and direct) are interleaved, so the Python / C and
on / off ratios compare figures taken under the same load. One more call of
every path is checked row by row afterwards.

Then the fixed cost of one call: `get` of an 8-byte row, node-local
(method 0), as a median like the rest and as the minimum over many short
repeats (what remains when the loaded machine leaves the process alone),
next to the raw cffi call of dds_get with ready arguments (the library's
own work plus cffi's) -- see docs/dev/performance.md.

Then one row per call side by side, same node (method 0, node-local), at
8 B and 3 KiB into a reused array: PyDDStore.get, the bare cffi call of
dds_get with the arguments ready, and the same dds_get calls from a C loop
(cloop.c, built here with the system compiler and called once per repeat),
each repeat one pass over 1024 random rows, the three interleaved; then
DistDataset.__getitem__ of one sample beside get of the same row into a
reused and into a fresh array (records `pysingle`, with the ratios of the
minima and of the medians; `--single-only` runs only these).

Last, the training loop of capi-tests/bench/bench_overlap.c through pyddstore
(method 0 collective and method 1 on shm, node-local reads off and on, 3 KiB
and 200 KiB rows, the default request-thread policy): steps that sleep T
(``time.sleep``) with the next batch read by ``get_batch_async`` before the
step and ``req.wait()`` after it, against the same steps alone and with a
blocking ``get_batch``; five repeats, each measuring R beside its loops;
the target (prefetch <= 1.15 x max(step alone, R)) is judged on the median
of the repeats' own ratios, and the prefetch loop's CPU use is recorded as
in C, with the CPUs each rank may run on (`affinity_cpus`, as in C).
`--overlap-only --append` runs only this figure and adds it to --out
(`make bench` runs it again with the ranks bound to a core each).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this tree's pyddstore first
import pyddstore as dds  # noqa: E402
from pyddstore import _lib  # noqa: E402

SIZES = (3072, 12800, 204800, 1048576)
BATCH = 128
# label (capi-tests/bench's), method, DDSTORE_FABRIC, DDSTORE_NODE_LOCAL; each
# pair is one store with node-local reads off and the same with them on
PAIRS = (
    (("mpi", 0, None, "0"), ("mpi+local", 0, None, "1")),
    (("fabric:shm", 1, "shm", "0"), ("fabric+local", 1, "shm", "1")),
)
GROUPS = tuple(g for pair in PAIRS for g in pair)
DESTS = ("reused", "fresh", "registered")
_perf = time.perf_counter


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [None] * 3


def make_store(comm, method, fabric, node_local):
    """The store of a group, or (None, why) when this build cannot serve it."""
    saved = {k: os.environ.get(k) for k in ("DDSTORE_FABRIC", "DDSTORE_NODE_LOCAL")}
    os.environ["DDSTORE_NODE_LOCAL"] = node_local  # read by dds_create
    if fabric:
        os.environ["DDSTORE_FABRIC"] = fabric
    try:
        return dds.PyDDStore(comm, method=method), None
    except dds.DDStoreError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def stats_of(per, comm):
    per = sorted(per)
    med = float(np.median(per))
    return {"median": round(med, 4), "min": round(per[0], 4), "max": round(per[-1], 4),
            "max_rank_median": round(comm.allreduce(med, op=MPI.MAX), 4)}


def timed(comm, fns, rows_per_call, opt):
    """Rank-0 statistics of us/row over the repeats of each of `fns`, whose
    repeats are interleaved (repeat k of every fn runs before repeat k+1 of
    any), so that the ratios between them see the same machine: on a loaded
    2-core machine figures taken minutes apart differ by 25%. Every rank makes
    the same number of calls (method-0 batches are collective), enough for the
    slowest rank's repeat of fns[0] to last min_repeat_ms."""
    for fn in fns:
        fn()  # warm: first-touch of destinations, registrations, caches
    calls, min_s = 1, opt.min_repeat_ms / 1000
    while True:
        comm.Barrier()
        t0 = _perf()
        for _ in range(calls):
            fns[0]()
        dt = comm.allreduce(_perf() - t0, op=MPI.MAX)
        if dt >= min_s or calls >= 1 << 20:
            break
        calls = max(calls * 2, int(calls * min_s / max(dt, 1e-9) * 1.1))
    per = [[] for _ in fns]
    for _ in range(opt.repeats):
        for fn, p in zip(fns, per):
            comm.Barrier()
            t0 = _perf()
            for _ in range(calls):
                fn()
            p.append((_perf() - t0) * 1e6 / (calls * rows_per_call))
    return [stats_of(p, comm) for p in per], calls


class Paths:
    """The six timed paths of one store and row size, and their check."""

    def __init__(self, comm, store, var, rows, elems, rng):
        self.store, self.var, self.elems = store, var, elems
        total = rows * comm.size
        self.pool = rng.integers(0, total, size=1 << 14, dtype=np.int64)
        self.pool_list = self.pool.tolist()  # get() takes Python ints (as training loops pass them)
        self.cursor = 0
        self.one = np.empty((1, elems), np.int64)
        self.batch = np.empty((BATCH, elems), np.int64)
        self.reg_one = np.empty((1, elems), np.int64)
        self.reg_batch = np.empty((BATCH, elems), np.int64)
        store.register_recv(var, self.reg_one)
        store.register_recv(var, self.reg_batch)
        self.last = None  # (destination, rows) of the latest call

    def _next(self, n):
        """Where the next call's n rows start in the pool (wrapping to 0)."""
        c = self.cursor
        if c + n > len(self.pool):
            c = 0
        self.cursor = c + n
        return c

    def get(self, dest):
        s, var, e, pool = self.store, self.var, self.elems, self.pool_list
        fixed = self.one if dest == "reused" else self.reg_one

        def call():
            c = self._next(1)
            dst = np.empty((1, e), np.int64) if dest == "fresh" else fixed
            s.get(var, dst, pool[c])
            self.last = (dst, self.pool[c:c + 1])
        return call

    def get_batch(self, dest):
        s, var, e, pool = self.store, self.var, self.elems, self.pool
        fixed = self.batch if dest == "reused" else self.reg_batch

        def call():
            c = self._next(BATCH)
            dst = np.empty((BATCH, e), np.int64) if dest == "fresh" else fixed
            idx = pool[c:c + BATCH]
            s.get_batch(var, dst, idx)
            self.last = (dst, idx)
        return call

    def direct(self, op, dest):
        """The same call made straight to the library through cffi with the
        arguments ready (no pyddstore in between): the C figure measured in
        this process, interleaved with pyddstore's."""
        s, var, e = self.store, self.var, self.elems
        lib, h, cname, ffi = s._lib, s._h, s._var(var).cname, _lib.ffi
        n = 1 if op == "get" else BATCH
        fixed = {"reused": self.one if n == 1 else self.batch,
                 "registered": self.reg_one if n == 1 else self.reg_batch}.get(dest)
        fixed_ptr = ffi.from_buffer(fixed) if fixed is not None else None
        nbytes = n * e * 8
        pool, pool_list = self.pool, self.pool_list

        def call():
            c = self._next(n)
            dst = np.empty((n, e), np.int64) if fixed is None else fixed
            ptr = ffi.from_buffer(dst) if fixed is None else fixed_ptr
            if n == 1:
                rc = lib.dds_get(h, cname, ptr, nbytes, pool_list[c], 1)
            else:
                idx = pool[c:c + n]
                rc = lib.dds_get_batch(h, cname, ptr, nbytes, ffi.from_buffer("int64_t[]", idx), n)
            if rc:
                raise RuntimeError(f"direct {op} failed with status {rc}")
            self.last = (dst, pool[c:c + n])
        return call

    def check(self, fn):
        """Runs fn once more into a zeroed destination; True if every row is right."""
        for d in (self.one, self.batch, self.reg_one, self.reg_batch):
            d.fill(0)
        fn()
        dst, idx = self.last
        want = idx[:, None] * self.elems + np.arange(self.elems, dtype=np.int64)
        return bool(np.array_equal(dst, want))

    def close(self):
        self.store.unregister_recv(self.var, self.reg_one)
        self.store.unregister_recv(self.var, self.reg_batch)


def run_pair(comm, out, pair, opt):
    """One store per group of `pair` (node-local off, then on), alive at the
    same time, so that every path of both, through pyddstore and direct, is
    timed in one interleaved set: the Python / C and on / off ratios then
    compare figures taken under the same load."""
    me = comm.rank
    for rb in opt.sizes:
        elems = rb // 8
        rows = max(1, (opt.shard_mib << 20) // rb)
        first = rows * me
        var = f"rows{rb}"
        live = []  # (label, method, node_local, store, paths)
        for label, method, fabric, node_local in pair:
            store, why = make_store(comm, method, fabric, node_local)
            if store is None:
                if me == 0 and rb == opt.sizes[0]:
                    out.write(json.dumps({"type": "pyskip", "group": label, "reason": why}) + "\n")
                    print(f"{label:12s} skipped: {why}")
                continue
            data = np.arange(first * elems, (first + rows) * elems, dtype=np.int64).reshape(rows, elems)
            store.add(var, data)
            del data
            rng = np.random.default_rng(1000 * me + rb + 7919 * len(live))
            live.append((label, method, node_local, store, Paths(comm, store, var, rows, elems, rng)))
        for op, batch in (("get", 1), ("get_batch", BATCH)):
            for dest in DESTS:
                fns, who = [], []
                for label, method, node_local, store, paths in live:
                    fns += [paths.get(dest) if op == "get" else paths.get_batch(dest), paths.direct(op, dest)]
                    who.append((label, method, node_local, paths))
                stats, calls = timed(comm, fns, batch, opt)
                for k, (label, method, node_local, paths) in enumerate(who):
                    py, direct = stats[2 * k], stats[2 * k + 1]
                    ok = comm.allreduce(paths.check(fns[2 * k]) and paths.check(fns[2 * k + 1]), op=MPI.LAND)
                    rec = {"type": "pymeasure", "group": label, "method": method, "node_local": int(node_local),
                           "op": op, "row_bytes": rb, "batch": batch, "dest": dest, "ranks": comm.size,
                           "repeats": opt.repeats, "calls_per_repeat": calls, "us_per_row": py,
                           "direct_us_per_row": direct, "interleaved": [w[0] for w in who], "verified": ok}
                    if me == 0:
                        out.write(json.dumps(rec) + "\n")
                        out.flush()
                        print(f"{label:12s} {op:9s} {rb:8d} {batch:4d} {dest:10s} {py['median']:10.3f} "
                              f"{py['min']:10.3f} {py['max']:10.3f} {py['max_rank_median']:10.3f} "
                              f"{direct['median']:10.3f}" + ("" if ok else "  VERIFY FAILED"))
        for *_, store, paths in live:
            paths.close()
            comm.Barrier()
            store.free()


def per_call(comm, out, opt):
    """The fixed cost of one 8-byte node-local get (method 0)."""
    store, why = make_store(comm, 0, None, "1")
    if store is None:
        return
    rows = 1 << 16
    store.add("tiny", np.arange(rows * comm.rank, rows * (comm.rank + 1), dtype=np.int64).reshape(rows, 1))
    pool = np.random.default_rng(7 + comm.rank).integers(0, rows * comm.size, size=1 << 12).tolist()
    dst = np.empty((1, 1), np.int64)
    state = [0]

    def get():
        c = state[0]
        state[0] = (c + 1) & 4095
        store.get("tiny", dst, pool[c])

    lib, var, h = store._lib, store._var("tiny"), store._h
    ptr = _lib.ffi.from_buffer(dst)

    def raw():
        c = state[0]
        state[0] = (c + 1) & 4095
        lib.dds_get(h, var.cname, ptr, 8, pool[c], 1)

    for what, fn in (("get", get), ("raw", raw)):
        (stats,), calls = timed(comm, [fn], 1, opt)
        best = float("inf")
        for _ in range(opt.short_repeats):  # short repeats: some fit in one time slice
            t0 = _perf()
            for _ in range(300):
                fn()
            best = min(best, (_perf() - t0) / 300 * 1e6)
        best = comm.allreduce(best, op=MPI.MAX)  # the slower rank's best
        ok = True
        if what == "get":
            dst.fill(-1)
            fn()
            ok = comm.allreduce(int(dst[0, 0]) == pool[(state[0] - 1) & 4095], op=MPI.LAND)
        if comm.rank == 0:
            rec = {"type": "pypercall", "what": what, "row_bytes": 8, "method": 0, "node_local": 1,
                   "ranks": comm.size, "us_per_call": stats, "best_us": round(best, 4),
                   "calls_per_repeat": calls, "verified": ok}
            out.write(json.dumps(rec) + "\n")
            print(f"per call, 8-byte node-local {what:4s}: median {stats['median']:.3f} us, "
                  f"best of short repeats {best:.3f} us" + ("" if ok else "  VERIFY FAILED"))
    comm.Barrier()
    store.free()


def build_cloop(comm):
    """The C loop of cloop.c built into a temporary directory (rank 0
    compiles, every rank loads it): a cffi library, or (None, why)."""
    import shutil
    import subprocess
    import tempfile
    import cffi
    path, why = None, None
    if comm.rank == 0:
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            why = "no C compiler (set CC)"
        else:
            path = os.path.join(tempfile.mkdtemp(prefix="ddstore-cloop-"), "libcloop.so")
            r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", path, os.path.join(HERE, "cloop.c")],
                               capture_output=True, text=True)
            if r.returncode:
                path, why = None, f"{cc} failed: {r.stderr.strip()[:300]}"
    path, why = comm.bcast((path, why), root=0)
    if path is None:
        return None, why
    ffi = cffi.FFI()
    ffi.cdef("double cloop_get(uintptr_t get, uintptr_t store, const char *name, uintptr_t dst, size_t bytes,"
             " const int64_t *starts, int64_t n, int64_t calls, int *status);")
    lib = ffi.dlopen(path)
    comm.Barrier()  # every rank has it mapped: the file can go
    if comm.rank == 0:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return (ffi, lib), None


def single_get(comm, out, opt):
    """One row per call into a reused array, same node (method 0, node-local
    reads: a copy out of the shared segment), at 8 B and 3 KiB: PyDDStore.get,
    the bare cffi call of dds_get with the arguments ready, and the same calls
    from a C loop (cloop.c) in this process; then a DistDataset's
    __getitem__ (one sample, one field, the DDSTORE_BATCH_GET=0 path) beside
    get of the same row of its variable. Each repeat is one short pass over
    1024 random global rows per path, the paths interleaved; figures are
    microseconds per call, the minimum over repeats (what remains when the
    loaded machine leaves the process alone) and the median."""
    me = comm.rank
    built, why = build_cloop(comm)
    if built is None and me == 0:
        print(f"single get: no C loop ({why})")
        out.write(json.dumps({"type": "pyskip", "group": "single-get C loop", "reason": why}) + "\n")
    store, why = make_store(comm, 0, None, "1")
    if store is None:
        return
    ffi = _lib.ffi
    repeats = opt.short_repeats
    for rb in (8, 3072):
        elems, rows, var = rb // 8, 4096, f"single{rb}"
        first = rows * me
        store.add(var, np.arange(first * elems, (first + rows) * elems, dtype=np.int64).reshape(rows, elems))
        pool = np.random.default_rng(31 + me + rb).integers(0, rows * comm.size, size=1024, dtype=np.int64)
        starts = pool.tolist()
        dst = np.empty((1, elems), np.int64)
        get = store.get
        c_get, h, cname, ptr = store._c_get, store._h, store._var(var).cname, ffi.from_buffer(dst)

        def py_loop():
            for s in starts:
                get(var, dst, s)

        def raw_loop():
            for s in starts:
                c_get(h, cname, ptr, rb, s, 1)

        def py_cffi_loop():  # get without its compiled path (pyddstore/_fastcall.c)
            fast, store._fast = store._fast, None
            try:
                py_loop()
            finally:
                store._fast = fast

        paths = [("PyDDStore.get", py_loop), ("cffi dds_get", raw_loop)]
        if store._fast is not None:
            paths.append(("PyDDStore.get, cffi path", py_cffi_loop))
        if built is not None:
            cffi_c, cl = built
            args = (int(ffi.cast("uintptr_t", ffi.addressof(store._lib, "dds_get"))),
                    int(ffi.cast("uintptr_t", h)), cname, int(ffi.cast("uintptr_t", ptr)), rb,
                    cffi_c.from_buffer("int64_t[]", pool), len(pool), len(pool))
            status = cffi_c.new("int *")

            def c_loop():
                cl.cloop_get(*args, status)
                if status[0]:
                    raise RuntimeError(f"dds_get from the C loop failed with status {status[0]}")
            paths.append(("C dds_get", c_loop))
        figures = {name: [] for name, _ in paths}
        for fn in (f for _, f in paths):
            fn()  # warm
        for _ in range(repeats):
            for name, fn in paths:
                comm.Barrier()
                t0 = _perf()
                fn()
                figures[name].append((_perf() - t0) / len(starts) * 1e6)
        dst.fill(-1)
        get(var, dst, starts[-1])
        ok = comm.allreduce(bool(np.array_equal(dst[0], starts[-1] * elems + np.arange(elems))), op=MPI.LAND)
        report_single(comm, out, f"get, {rb} B", rb, figures, [("PyDDStore.get", "cffi dds_get"),
                                                              ("PyDDStore.get, cffi path", "cffi dds_get"),
                                                              ("PyDDStore.get", "C dds_get"),
                                                              ("cffi dds_get", "C dds_get")], ok)
    comm.Barrier()
    store.free()
    dataset_getitem(comm, out, opt)


def dataset_getitem(comm, out, opt):
    """DistDataset.__getitem__ of one 3 KiB sample against get of the same
    row of its variable (into a reused array)."""
    try:
        import torch
        from pyddstore.torch import DistDataset
    except ImportError as exc:
        if comm.rank == 0:
            out.write(json.dumps({"type": "pyskip", "group": "DistDataset.__getitem__", "reason": str(exc)}) + "\n")
        return
    elems = 384

    class Source:  # every rank's view of the whole dataset; DistDataset stores this rank's share
        def __len__(self):
            return 2048 * comm.size

        def __getitem__(self, k):
            return torch.arange(k * elems, (k + 1) * elems, dtype=torch.int64)

    source = Source()
    saved = os.environ.get("DDSTORE_NODE_LOCAL")
    os.environ["DDSTORE_NODE_LOCAL"] = "1"
    try:
        ds = DistDataset(source, "single", comm=comm, method=0)
    finally:
        if saved is None:
            os.environ.pop("DDSTORE_NODE_LOCAL", None)
        else:
            os.environ["DDSTORE_NODE_LOCAL"] = saved
    del source
    store, var = ds.ddstore, ds.variables[0]
    starts = np.random.default_rng(53 + comm.rank).integers(0, len(ds), size=1024).tolist()
    dst = np.empty((1, elems), np.int64)
    get, getitem, empty, i64 = store.get, ds.__getitem__, np.empty, np.int64

    def get_loop():
        for s in starts:
            get(var, dst, s)

    def fresh_loop():  # what a sample needs at least: a destination of its own
        for s in starts:
            get(var, empty((1, elems), i64), s)

    def tensor_loop():  # ... and a tensor of its own: what a torch sample needs at least
        from_numpy = torch.from_numpy
        for s in starts:
            buf = empty((1, elems), i64)
            get(var, buf, s)
            from_numpy(buf[0])

    def item_loop():
        for s in starts:
            getitem(s)

    paths = [("PyDDStore.get", get_loop), ("PyDDStore.get, fresh array", fresh_loop),
             ("PyDDStore.get, fresh tensor", tensor_loop), ("DistDataset.__getitem__", item_loop)]
    figures = {name: [] for name, _ in paths}
    for _, fn in paths:
        fn()
    for _ in range(opt.short_repeats):
        for name, fn in paths:
            comm.Barrier()
            t0 = _perf()
            fn()
            figures[name].append((_perf() - t0) / len(starts) * 1e6)
    s = starts[-1]
    ok = comm.allreduce(bool(torch.equal(ds[s], torch.arange(s * elems, (s + 1) * elems))), op=MPI.LAND)
    report_single(comm, out, f"sample, {elems * 8} B", elems * 8, figures,
                  [("DistDataset.__getitem__", "PyDDStore.get"),
                   ("DistDataset.__getitem__", "PyDDStore.get, fresh array"),
                   ("DistDataset.__getitem__", "PyDDStore.get, fresh tensor"),
                   ("PyDDStore.get, fresh tensor", "PyDDStore.get")], ok)
    comm.Barrier()
    ds.ddstore.free()


def report_single(comm, out, what, rb, figures, ratios, ok):
    """One pysingle record: each path's min and median us per call (the
    slower rank's), and the ratios asked for, of the minima and of the medians."""
    stats = {}
    for name, per in figures.items():
        stats[name] = {"min": round(comm.allreduce(min(per), op=MPI.MAX), 4),
                       "median": round(comm.allreduce(float(np.median(per)), op=MPI.MAX), 4)}
    rat = {f"{a} / {b}": {k: round(stats[a][k] / stats[b][k], 3) for k in ("min", "median")}
           for a, b in ratios if a in stats and b in stats}
    if comm.rank == 0:
        out.write(json.dumps({"type": "pysingle", "what": what, "row_bytes": rb, "method": 0, "node_local": 1,
                              "ranks": comm.size, "repeats": len(next(iter(figures.values()))),
                              "us_per_call": stats, "ratios": rat, "verified": ok}) + "\n")
        out.flush()
        print(f"single {what}: " + ", ".join(f"{n} {v['min']:.3f} (median {v['median']:.3f}) us"
                                             for n, v in stats.items()) + ("" if ok else "  VERIFY FAILED"))
        for k, v in rat.items():
            print(f"    {k}: {v['min']:.2f} of the minima, {v['median']:.2f} of the medians")


# (label, method, provider, DDSTORE_NODE_LOCAL): the transport moving the
# rows, then each method as it runs by default with every rank on one node.
OV_GROUPS = (("mpi", 0, None, "0"), ("fabric:shm", 1, "shm", "0"),
             ("mpi+local", 0, None, "1"), ("fabric+local", 1, "shm", "1"))
OV_SIZES = (3072, 204800)
OV_REPEATS, OV_MIN_STEPS, OV_MAX_STEPS, OV_LOOP_S = 5, 40, 400, 0.05


def overlap(comm, out, opt):
    """The training-loop figure through pyddstore (see the module docstring)."""
    for label, method, fabric, node_local in OV_GROUPS:
        for rb in OV_SIZES:
            store, why = make_store(comm, method, fabric, node_local)
            if store is None:
                if comm.rank == 0:
                    print(f"training loop {label}: skipped ({why})")
                continue
            elems = rb // 8
            rows = max(2 * BATCH, (64 << 20) // rb // comm.size)  # 64 MiB in all, as the C figure
            first = rows * comm.rank
            store.add("v", np.arange(first * elems, (first + rows) * elems, dtype=np.int64).reshape(rows, elems))
            rng = np.random.default_rng(31 * comm.rank + rb)
            order = [rng.integers(0, rows * comm.size, size=BATCH, dtype=np.int64) for _ in range(OV_MAX_STEPS)]
            bufs = [np.zeros((BATCH, elems), np.int64) for _ in range(2)]

            def blocking():
                per = []
                for k in range(OV_MIN_STEPS):
                    comm.Barrier()
                    t0 = _perf()
                    store.get_batch("v", bufs[k % 2], order[k])
                    per.append(_perf() - t0)
                return comm.allreduce(float(np.median(per[4:])), op=MPI.MAX)

            def loop(mode, steps, T):
                comm.Barrier()
                cpu0, mine0 = time.process_time(), time.thread_time()
                t0 = _perf()
                req = store.get_batch_async("v", bufs[0], order[0]) if mode == "prefetch" else None
                for k in range(steps):
                    if mode == "prefetch":
                        req.wait()
                        if k + 1 < steps:
                            req = store.get_batch_async("v", bufs[(k + 1) % 2], order[k + 1])
                    elif mode == "plain":
                        store.get_batch("v", bufs[k % 2], order[k])
                    time.sleep(T)
                wall = _perf() - t0
                per = wall / steps
                cpu, mine = time.process_time() - cpu0, time.thread_time() - mine0
                # Both ranks' CPU per second of the loop, and the library threads' part (as in C).
                used = comm.allreduce(np.array([cpu / wall, (cpu - mine) / wall]), op=MPI.SUM)
                last = (steps - 1) % 2
                ok = mode == "alone" or bool(np.array_equal(
                    bufs[last], order[steps - 1][:, None] * elems + np.arange(elems, dtype=np.int64)))
                return comm.allreduce(per, op=MPI.MAX), ok, used

            T = blocking()
            steps = int(min(OV_MAX_STEPS, max(OV_MIN_STEPS, OV_LOOP_S / (2 * T + 1e-4) + 1)))
            steps = comm.bcast(steps)
            fig = {"R": [], "alone": [], "plain": [], "prefetch": [], "ratio": [], "cpu": [], "lib_cpu": []}
            verified = True
            for _ in range(OV_REPEATS):
                fig["R"].append(blocking())
                for mode in ("alone", "plain", "prefetch"):
                    per, ok, used = loop(mode, steps, T)
                    fig[mode].append(per)
                    verified &= ok
                    if mode == "prefetch":
                        fig["cpu"].append(float(used[0]))
                        fig["lib_cpu"].append(float(used[1]))
                fig["ratio"].append(fig["prefetch"][-1] / max(fig["alone"][-1], fig["R"][-1]))
            verified = comm.allreduce(verified, op=MPI.LAND)
            med = {k: float(np.median(v)) for k, v in fig.items()}
            rec = {"type": "pyoverlap", "group": label, "method": method, "row_bytes": rb, "batch": BATCH,
                   "node_local": int(node_local), "ranks": comm.size, "steps": steps, "repeats": OV_REPEATS,
                   "step_ms": round(1e3 * T, 4),
                   "read_ms": round(1e3 * med["R"], 4), "step_alone_ms": round(1e3 * med["alone"], 4),
                   "plain_ms": round(1e3 * med["plain"], 4), "prefetch_ms": round(1e3 * med["prefetch"], 4),
                   "ratio": round(med["ratio"], 4), "cpu_cores": round(med["cpu"], 4),
                   "lib_cpu_cores": round(med["lib_cpu"], 4), "machine_cores": os.cpu_count(),
                   "affinity_cpus": comm.allreduce(len(os.sched_getaffinity(0)), op=MPI.MAX), "verified": verified}
            if comm.rank == 0:
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(f"training loop {label:10s} {rb:7d} B: R {rec['read_ms']:.3f} ms, T {rec['step_ms']:.3f} ms, "
                      f"step alone {rec['step_alone_ms']:.3f}, no prefetch {rec['plain_ms']:.3f}, "
                      f"prefetch {rec['prefetch_ms']:.3f} ms ({rec['ratio']:.2f} x max); CPU {rec['cpu_cores']:.2f} of "
                      f"{rec['machine_cores']} cores (library threads {rec['lib_cpu_cores']:.2f}); each rank on "
                      f"{rec['affinity_cpus']} CPU(s)"
                      + ("" if verified else "  WRONG ROWS"))
            comm.Barrier()
            store.free()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/bench/python.jsonl")
    ap.add_argument("--quick", action="store_true",
                    help="as the C bench's --quick: 3 KiB and 200 KiB rows, 4 MiB shards, 3 repeats of 2 ms")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--min-repeat-ms", type=float, default=20.0)
    ap.add_argument("--shard-mib", type=int, default=256)
    ap.add_argument("--groups", default=",".join(g[0] for g in GROUPS))
    ap.add_argument("--overlap-only", action="store_true", help="only the training-loop figure")
    ap.add_argument("--single-only", action="store_true", help="only the single-get figures")
    ap.add_argument("--append", action="store_true", help="add to --out instead of replacing it")
    opt = ap.parse_args()
    sizes_given = opt.sizes != ap.get_default("sizes")
    opt.sizes = [int(x) for x in opt.sizes.split(",")]
    opt.short_repeats = 300
    if opt.quick:  # as capi-tests/bench --quick, so that the figures pair up
        opt.shard_mib, opt.repeats, opt.min_repeat_ms, opt.short_repeats = 4, 3, 2.0, 10
        if not sizes_given:
            opt.sizes = [3072, 204800]
    comm = MPI.COMM_WORLD
    out = open(opt.out, "a" if opt.append else "w") if comm.rank == 0 else open(os.devnull, "w")
    if opt.overlap_only:
        overlap(comm, out, opt)
        out.close()
        return
    if opt.single_only:
        single_get(comm, out, opt)
        out.close()
        return
    t0 = time.time()
    if comm.rank == 0:
        out.write(json.dumps({"type": "pymeta", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "ranks": comm.size, "python": sys.version.split()[0], "numpy": np.__version__,
                              "binding": f"cffi ({_lib.FFI_SOURCE})", "library": dds.library_path(),
                              "loadavg_start": loadavg(), "repeats": opt.repeats,
                              "min_repeat_ms": opt.min_repeat_ms, "shard_bytes": opt.shard_mib << 20,
                              "quick": opt.quick}) + "\n")
        print(f"{'group':12s} {'op':9s} {'row':>8s} {'rows':>4s} {'dest':10s} {'median':>10s} {'min':>10s} "
              f"{'max':>10s} {'max rank':>10s} {'direct':>10s}   (us per row)")
    wanted = opt.groups.split(",")
    for pair in PAIRS:
        chosen = tuple(g for g in pair if g[0] in wanted)
        if chosen:
            run_pair(comm, out, chosen, opt)
    per_call(comm, out, opt)
    single_get(comm, out, opt)
    overlap(comm, out, opt)
    if comm.rank == 0:
        out.write(json.dumps({"type": "pyend", "seconds": round(time.time() - t0, 1),
                              "loadavg_end": loadavg()}) + "\n")
    out.close()


if __name__ == "__main__":
    main()
