#!/usr/bin/env python3
"""Turns the benchmark's JSON lines into docs/dev/results.md and docs/dev/results.png.

    bench-report.py build/bench/results.jsonl --md docs/dev/results.md --png docs/dev/results.png

Input: the records written by capi-tests/bench (`meta`, `skip`, `measure`,
`end`, `memory`), and with --python those of python-ctypes/bench/bench.py
(`pymeta`, `pyskip`, `pymeasure`, `pypercall`, `pysingle`, `pyend`) from the same
`make bench` run, shown beside the C figures (section "Python"), and those of
python-ctypes/bench/train_loop.py (`pytrainmeta`, `pytrain`, `pytrainparts`,
`pytrainend`: section "Training loop: epochs against the in-memory limit";
`--train-only --python FILE` replaces only that section of --md). The Markdown page has a header (machine, load, date,
commit), the targets with met/missed (single reader thread), one table per
row size (store next to its floors, with ratios), the reader-thread scaling
of method 1, the batch sweep and the memory check. The section
between `<!-- analysis:begin -->` and `<!-- analysis:end -->` of
docs/dev/performance.md (the hand-written analysis of misses) is copied in.
Only the standard library is needed for the Markdown; matplotlib for the PNG.
"""
import argparse
import json
import os
import platform
import subprocess
import sys

TARGET = 1.25  # store / floor
AUTO_TARGET = 1.05  # issue 40: the auto batch mode against the better fixed mode
NOISE_LIMIT = 0.10  # replaced by the run's --max-noise
GROUP_NOTE = {
    "mpi": "method 0, node-local reads off: remote rows over MPI; floors timed interleaved with it",
    "mpi onesided": "method 0 in the one-sided batch mode (pipelined MPI_Get), node-local reads off",
    "mpi auto": "method 0 in the auto batch mode (each variable keeps the faster of the two), node-local reads off",
    "mpi+local": "method 0, node-local reads on (the default): rows of this node copied from shared memory",
    "fabric:shm": "method 1, libfabric shm provider, node-local reads off",
    "fabric:tcp": "method 1, libfabric tcp;ofi_rxm on lo, node-local reads off",
    "fabric+local": "method 1 (shm), node-local reads on",
}
MEM_SLACK = 0.05
BATCH = 128
# Destination kinds, in the benchmark's order (capi-tests/bench/harness.h).
DESTS = ["reused", "fresh", "registered", "page+0", "page+16", "page+64"]
# The reused destinations compared across offsets, the row size and target.
OFFSET_DESTS = ["reused", "page+0", "page+16", "page+64"]
OFFSET_ROW = 204800
OFFSET_TARGET = 1.2


def threads(m):
    """Reader threads of a record (records before the field existed: 1)."""
    return m.get("threads", 1)


def merge(runs):
    """Several runs of the same program: meta/end from the first, and for every
    group of measurements (paths timed together) the run in which other
    processes took the least CPU while that group ran."""
    if len(runs) == 1:
        return runs[0]
    best = {}
    for n, recs in enumerate(runs):
        groups = {}
        for r in recs:
            if r.get("type") == "measure":
                groups.setdefault(r.get("group_key"), []).append(r)
        for key, rs in groups.items():
            noise = max(r.get("other_cpu", 1.0) for r in rs)
            if key not in best or noise < best[key][0]:
                best[key] = (noise, rs)
    first = runs[0]
    out = [r for r in first if r.get("type") in ("meta", "skip")]
    order = []
    for recs in runs:
        for r in recs:
            if r.get("type") == "measure" and r.get("group_key") not in order:
                order.append(r.get("group_key"))
    for key in order:
        out += best[key][1]
    mem = {}
    for recs in runs:
        for r in recs:
            if r.get("type") == "memory":
                mem[(r["mode"], r.get("node_local"), seg_pages(r), r["rank"])] = r
    out += list(mem.values())
    req = {}
    for recs in runs:
        for r in recs:
            if r.get("type") == "reqbytes":
                req[(r["group"], r["row_bytes"])] = r
    out += list(req.values())
    ov = {}
    for recs in runs:
        for r in recs:
            if r.get("type") == "overlap":
                ov[(r["method"], r.get("priority", "normal"), r["rb"], r.get("affinity_cpus"),
                    r.get("ucx_settings", ""))] = r
    out += list(ov.values())
    rg = {}
    for recs in runs:
        for r in recs:
            if r.get("type") == "ragged":
                rg[(r["method"], r["mean_bytes"])] = r
            elif r.get("type") == "ragged_meta":
                rg[("meta",)] = r
    out += list(rg.values())
    ends = [r for recs in runs for r in recs if r.get("type") == "end"]
    if ends:
        end = dict(ends[0])
        end["seconds"] = round(sum(e.get("seconds", 0) for e in ends), 1)
        end["verified"] = all(e.get("verified") for e in ends)
        end["loadavg_end"] = ends[-1].get("loadavg_end")
        noisy = sum(1 for noise, _ in best.values() if noise > end.get("max_noise", NOISE_LIMIT))
        end["noisy_groups"] = noisy
        end["merged_runs"] = len(runs)
        out.append(end)
    return out


def load(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
    return recs


def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit():
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("-dirty" if dirty else "")


def mem_total_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def size_name(b):
    if b >= 2**20 and b % 2**20 == 0:
        return f"{b // 2**20} MiB"
    if b >= 1000:
        return f"{b / 1024:g} KiB"
    return f"{b} B"


def fmt(x, digits=3):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}" if x < 1 else f"{x:.2f}"


def noise(m):
    """Other processes' CPU share while the record's group ran; bold when above the run's limit."""
    if "other_cpu" not in m:
        return "?"
    txt = f"{100 * m['other_cpu']:.0f}%"
    return f"**{txt}**" if m["other_cpu"] > NOISE_LIMIT else txt


def ratio_txt(r, ok=None):
    if r is None:
        return "–"
    s = f"{r:.2f}x"
    if ok is False:
        s = f"**{s}**"
    return s


class Results:
    def __init__(self, recs):
        self.meta = next((r for r in recs if r.get("type") == "meta"), {})
        self.end = next((r for r in recs if r.get("type") == "end"), {})
        self.skips = [r for r in recs if r.get("type") == "skip"]
        self.meas = [r for r in recs if r.get("type") == "measure"]
        self.reqbytes = [r for r in recs if r.get("type") == "reqbytes"]
        self.mem = [r for r in recs if r.get("type") == "memory"]
        self.overlap = [r for r in recs if r.get("type") == "overlap"]
        self.ragged = [r for r in recs if r.get("type") == "ragged"]
        self.ragged_meta = next((r for r in recs if r.get("type") == "ragged_meta"), None)
        self.sizes = sorted({m["row_bytes"] for m in self.meas})
        self.methods = []
        for m in self.meas:
            if m["kind"] == "store" and m["method"] not in self.methods:
                self.methods.append(m["method"])

    def find(self, path, rb, batch, dest="reused", method=None, op=None, group=None, nthreads=1):
        """The record of a path; with `group`, one timed in that group if any."""
        hits = [m for m in self.meas
                if m["path"] == path and m["row_bytes"] == rb and m["batch"] == batch and m["dest"] == dest
                and threads(m) == nthreads
                and (method is None or m["method"] == method) and (op is None or m["op"] == op)]
        if group is not None:
            mine = [m for m in hits if m.get("group") == group]
            hits = mine or hits
        return hits[0] if hits else None

    def med(self, *a, **k):
        m = self.find(*a, **k)
        return m["us_per_row"]["median"] if m else None


def targets(R):
    """Rows of (target, where, figure, met, ratio) for the targets table."""
    rows = []
    for meth in R.methods:
        for rb in R.sizes:
            b = R.find("store", rb, BATCH, method=meth, op="get_batch")
            if b and b.get("ratio_to_floor") is not None:
                r = b["ratio_to_floor"]
                rows.append((f"{meth}: dds_get_batch ({BATCH}) ≤ {TARGET}x batch floor", size_name(rb),
                             f"{r:.2f}x ({fmt(b['us_per_row']['median'])} vs "
                             f"{fmt(R.med(b['floor'], rb, BATCH, group=meth))} us/row, {b['floor']})", r <= TARGET, r))
        for rb in R.sizes:
            g = R.find("store", rb, 1, method=meth, op="get")
            if g and g.get("ratio_to_floor") is not None:
                r = g["ratio_to_floor"]
                rows.append((f"{meth}: dds_get ≤ {TARGET}x single-op floor", size_name(rb),
                             f"{r:.2f}x ({fmt(g['us_per_row']['median'])} vs {fmt(R.med(g['floor'], rb, 1, group=meth))} us/row, "
                             f"{g['floor']})", r <= TARGET, r))
        for rb in R.sizes:
            g1 = R.med("store", rb, 1, method=meth, op="get")
            g = R.med("store", rb, BATCH, method=meth, op="get")  # 128 dds_get into the batch's destination
            b = R.med("store", rb, BATCH, method=meth, op="get_batch")
            if b is None or (g is None and g1 is None):
                continue
            ref = g if g is not None else g1
            slower = [m["batch"] for m in R.meas if m["kind"] == "store" and m["method"] == meth and
                      m["op"] == "get_batch" and m["row_bytes"] == rb and m["dest"] == "reused" and
                      threads(m) == 1 and m["us_per_row"]["median"] > ref]
            extra = f"; sweep batches slower: {', '.join(map(str, sorted(slower)))}" if slower else ""
            one = f"; dds_get into a 1-row buffer: {fmt(g1)} us/row" if g is not None and g1 is not None else ""
            what = "for {BATCH} dds_get into the same destination" if g is not None else "for dds_get into a 1-row buffer"
            rows.append((f"{meth}: batch ({BATCH}) never slower per row than dds_get"
                         + ("" if g is not None else " (1-row buffer)"), size_name(rb),
                         f"{b / ref:.2f}x ({fmt(b)} vs {fmt(ref)} us/row {what.format(BATCH=BATCH)}{one}){extra}",
                         b <= ref, b / ref))
        if meth == "mpi auto":
            # Issue 40: auto within 5% of the better fixed mode, every batch
            # size (its ratio_to_floor: both fixed modes are timed in its groups).
            for rb in R.sizes:
                cells = sorted((m["batch"], m["ratio_to_floor"]) for m in R.meas
                               if m["kind"] == "store" and m["method"] == meth and m["op"] == "get_batch"
                               and m["row_bytes"] == rb and m["dest"] == "reused" and threads(m) == 1
                               and m.get("ratio_to_floor") is not None)
                if cells:
                    worst = max(r for _, r in cells)
                    met = sum(r <= AUTO_TARGET for _, r in cells)
                    rows.append((f"mpi auto: dds_get_batch ≤ {AUTO_TARGET}x the better fixed mode, every batch size",
                                 size_name(rb), f"{met} of {len(cells)} batch sizes; worst {worst:.2f}x; by batch: "
                                 + ", ".join(f"{b} {r:.2f}" for b, r in cells), met == len(cells), worst))
        if meth == "mpi":
            for rb in R.sizes:
                b = R.find("store", rb, BATCH, method=meth, op="get_batch")
                if b and "mpi-alltoallv" in b.get("ratios", {}):
                    r = b["ratios"]["mpi-alltoallv"]
                    rows.append((f"mpi: dds_get_batch ({BATCH}) ≤ {TARGET}x raw MPI_Alltoallv", size_name(rb),
                                 f"{r:.2f}x ({fmt(b['us_per_row']['median'])} vs "
                                 f"{fmt(R.med('mpi-alltoallv', rb, BATCH, group=meth))} us/row)", r <= TARGET, r))
    for meth in R.methods:
        got, r = offset_rows(R, meth, OFFSET_ROW)
        if r is not None:
            lo, hi = min(got, key=got.get), max(got, key=got.get)
            rows.append((f"{meth}: dds_get_batch ({BATCH}) across destination offsets, worst/best ≤ {OFFSET_TARGET}x",
                         size_name(OFFSET_ROW),
                         f"{r:.2f}x ({fmt(got[hi])} us/row at {hi} vs {fmt(got[lo])} at {lo})", r <= OFFSET_TARGET, r))
    for mode, what in (("add", "dds_add peak ≤ shard + 5%"), ("chunked", "dds_init + dds_update peak ≤ shard + chunk + 5%")):
        for nl in sorted({m.get("node_local", -1) for m in R.mem if m["mode"] == mode}):
            recs = [m for m in R.mem if m["mode"] == mode and m.get("node_local", -1) == nl]
            worst = max(recs, key=lambda m: m["extra_peak_bytes"] / m["limit_bytes"])
            extra = worst["extra_peak_bytes"] / 2**20
            limit = worst["limit_bytes"] / 2**20
            where = {1: "node-local on (shm segment)", 0: "node-local off (heap)"}.get(nl, "")
            rows.append((what, f"{size_name(worst['shard_bytes'])} shard, {where}, worst of {len(recs)} ranks",
                         f"{extra:.1f} MiB (limit {limit:.1f} MiB, {worst['ratio_to_shard']:.3f}x shard)",
                         all(m["met"] for m in recs), worst["extra_peak_bytes"] / worst["shard_bytes"]))
    return rows


def row_table(R, rb, group):
    out = ["| path | op | batch | dest | threads | us/row median | min | max | max over ranks | floor | store/floor | other ratios | other CPU |",
           "|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    keep = [m for m in R.meas if m["row_bytes"] == rb and m.get("group") == group and m["batch"] in (1, BATCH)]
    # single ops before batches, one thread before several, floors before the store
    keep.sort(key=lambda m: (m["batch"], m["op"] != "get", threads(m), m["kind"] == "store", m["path"],
                             DESTS.index(m["dest"])))
    for m in keep:
        u = m["us_per_row"]
        path = m["path"] if m["kind"] == "floor" else "**store**"
        r = m.get("ratio_to_floor")
        others = ", ".join(f"{k} {v:.2f}x" for k, v in m.get("ratios", {}).items() if k != m.get("floor"))
        ok = None if r is None else r <= TARGET
        out.append(f"| {path} | {m['op']} | {m['batch']} | {m['dest']} | {threads(m)} | {fmt(u['median'])} | {fmt(u['min'])} | "
                   f"{fmt(u['max'])} | {fmt(u['max_rank_median'])} | {m.get('floor') or ''} | {ratio_txt(r, ok)} | "
                   f"{others} | {noise(m)} |")
    return out


def sweep_table(R):
    batches = sorted({m["batch"] for m in R.meas if m["op"] == "get_batch"})
    out = []
    for rb in R.sizes:
        paths = []
        for m in R.meas:
            if m["row_bytes"] == rb and m["op"] == "get_batch" and m["dest"] == "reused" and threads(m) == 1:
                key = (m["kind"], m.get("group"), m["path"])
                if key not in paths and (m["kind"] == "store" or not any(p[2] == m["path"] for p in paths)):
                    paths.append(key)
        if not paths:
            continue
        out.append(f"\n**{size_name(rb)} rows** (us/row, median of rank 0; reused destination)\n")
        out.append("| path | " + " | ".join(str(b) for b in batches) + " |")
        out.append("|---|" + "---:|" * len(batches))
        for kind, grp, path in paths:
            cells = []
            for b in batches:
                v = R.med(path, rb, b, op="get_batch", group=grp)
                cells.append(fmt(v))
            name = f"**store ({grp})**" if kind == "store" else f"floor: {path}"
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        for grp in R.methods:
            g = R.med("store", rb, 1, op="get", method=grp)
            if g is not None:
                out.append(f"| dds_get ({grp}), for comparison | {fmt(g)} |" + " |" * (len(batches) - 1))
    return out


def offset_rows(R, meth, rb):
    """dds_get_batch ({BATCH} rows) of `meth` at `rb` into each reused
    destination kind: {dest: us/row}, and worst/best over them (None when
    fewer than two were measured)."""
    got = {d: R.med("store", rb, BATCH, dest=d, method=meth, op="get_batch") for d in OFFSET_DESTS}
    got = {d: v for d, v in got.items() if v is not None}
    return got, (max(got.values()) / min(got.values()) if len(got) > 1 else None)


def offset_table(R):
    out = [f"| group | row size | " + " | ".join(OFFSET_DESTS) + " | worst/best |",
           "|---|---|" + "---:|" * (len(OFFSET_DESTS) + 1)]
    for meth in R.methods:
        for rb in R.sizes:
            got, r = offset_rows(R, meth, rb)
            if r is None:
                continue
            cells = " | ".join(fmt(got.get(d)) for d in OFFSET_DESTS)
            out.append(f"| {meth} | {size_name(rb)} | {cells} | {ratio_txt(r, r <= OFFSET_TARGET)} |")
    return out


def thread_table(R):
    """Method-1 reads with 1, 2 and 4 reader threads per rank: per-row time
    (wall time of a repeat / rows of every thread), the floor timed with the
    same thread count in the same group, and the speed-up over one thread."""
    groups = [g for g in R.methods if any(threads(m) > 1 for m in R.meas if m.get("group") == g)]
    if not groups:
        return ["(not run)"]
    out = ["| store | row size | op | threads | store us/row | floor (same threads) | floor us/row | store/floor | "
           "store speed-up over 1 thread | floor speed-up | other CPU |",
           "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for g in groups:
        for rb in R.sizes:
            for op, batch in (("get", 1), ("get_batch", BATCH)):
                one = R.find("store", rb, batch, method=g, op=op, group=g)
                for t in sorted({threads(m) for m in R.meas if m.get("group") == g}):
                    m = R.find("store", rb, batch, method=g, op=op, group=g, nthreads=t)
                    if m is None:
                        continue
                    fname = m.get("floor")
                    f = R.find(fname, rb, batch, group=g, nthreads=t) if fname else None
                    f1 = R.find(fname, rb, batch, group=g) if fname else None
                    med = m["us_per_row"]["median"]
                    fmed = f["us_per_row"]["median"] if f else None
                    up = one["us_per_row"]["median"] / med if one else None
                    fup = f1["us_per_row"]["median"] / fmed if f1 and fmed else None
                    r = m.get("ratio_to_floor")
                    out.append(f"| {g} | {size_name(rb)} | {op} | {t} | {fmt(med)} | {fname or '–'} | {fmt(fmed)} | "
                               f"{ratio_txt(r)} | {'–' if up is None else f'{up:.2f}x'} | "
                               f"{'–' if fup is None else f'{fup:.2f}x'} | {noise(m)} |")
    return out


def seg_pages(m):
    """How a memory run's process mapped the node's segments: hugetlbfs,
    transparent huge pages (the share of resident kB mapped with them), 4 KiB
    pages, or none (heap shards; runs before the field existed)."""
    if m.get("seg_hugetlb_kb"):
        return "hugetlbfs"
    if m.get("seg_thp_kb"):
        return f"THP ({100 * m['seg_thp_kb'] / max(m.get('seg_rss_kb') or 1, 1):.0f}%)"
    return "4 KiB" if m.get("seg_rss_kb") else "–"


def memory_table(R):
    if not R.mem:
        return ["(not run)"]
    out = ["| mode | node-local | segments in | segment pages | rank | shard | chunk | baseline RSS | peak above baseline (minus source) | limit | x shard | met | time in the calls | VmPTE before / after reading every row |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for m in R.mem:
        nl = {1: "on", 0: "off"}.get(m.get("node_local"), "?")
        where = m.get("shm_dir", "/dev/shm") if nl == "on" else "–"
        if "/ddstore-bench-thp." in where:  # scripts/bench-mem-huge.sh's mount
            where = "tmpfs, huge=advise"
        out.append(f"| {m['mode']} | {nl} | {where} | {seg_pages(m) if nl == 'on' else '–'} | {m['rank']} | "
                   f"{size_name(m['shard_bytes'])} | "
                   f"{size_name(m['chunk_bytes']) if m['chunk_bytes'] else '–'} | {m['baseline_rss'] / 2**20:.1f} MiB | "
                   f"{m['extra_peak_bytes'] / 2**20:.1f} MiB | {m['limit_bytes'] / 2**20:.1f} MiB | "
                   f"{m['ratio_to_shard']:.3f} | {'yes' if m['met'] else '**no**'} | {m['seconds']:.2f} s | "
                   + (f"{m['vm_pte_baseline'] / 1024:.0f} / {m['vm_pte_bytes'] / 1024:.0f} KiB |" if "vm_pte_bytes" in m else "– |"))
    return out


PY_PER_CALL_TARGET = 1.7  # us for an 8-byte node-local get (DDStore 2.0's Cython binding: 1.7-2.0)
PY_GROUP_OFF = {"mpi+local": "mpi", "fabric+local": "fabric:shm"}  # node-local on -> the same store with it off


def py_load(path):
    recs = load(path)
    return {
        "meta": next((r for r in recs if r.get("type") == "pymeta"), {}),
        "end": next((r for r in recs if r.get("type") == "pyend"), {}),
        "skips": [r for r in recs if r.get("type") == "pyskip"],
        "meas": [r for r in recs if r.get("type") == "pymeasure"],
        "percall": {r["what"]: r for r in recs if r.get("type") == "pypercall"},
        "single": [r for r in recs if r.get("type") == "pysingle"],
        "overlap": [r for r in recs if r.get("type") == "pyoverlap"],
        "snapshot": [r for r in recs if r.get("type") == "pysnapshot"],
        "train": [r for r in recs if r.get("type") == "pytrain"],
        "trainparts": [r for r in recs if r.get("type") == "pytrainparts"],
        "trainmeta": next((r for r in recs if r.get("type") == "pytrainmeta"), {}),
        "trainend": next((r for r in recs if r.get("type") == "pytrainend"), {}),
    }


def py_find(P, group, op, rb, dest="reused"):
    for m in P["meas"]:
        if m["group"] == group and m["op"] == op and m["row_bytes"] == rb and m["dest"] == dest:
            return m
    return None


SNAPSHOT_TARGET = 0.8  # dds_save / dds_load throughput over the disk's own (issue 38)

# Issue 40's targets for one row per call (bench.py's pysingle records).
PY_SINGLE_TARGETS = {"PyDDStore.get / cffi dds_get": 1.15, "cffi dds_get / C dds_get": 1.3,
                     # the two above together (1.15 x 1.3): what a Python user pays over C
                     "PyDDStore.get / C dds_get": 1.5,
                     "DistDataset.__getitem__ / PyDDStore.get": 1.5}


def py_targets(R, P):
    """Rows of (target, where, figure, met) for the Python section."""
    rows = []
    get = P["percall"].get("get")
    raw = P["percall"].get("raw")
    if get:
        med, best = get["us_per_call"]["median"], get["best_us"]
        extra = f"; the raw cffi call of dds_get: median {fmt(raw['us_per_call']['median'])}, best {fmt(raw['best_us'])} us" \
            if raw else ""
        rows.append((f"pyddstore get of an 8-byte node-local row ≤ {PY_PER_CALL_TARGET} us per call",
                     f"method 0, {get['ranks']} ranks",
                     f"median {fmt(med)} us, best of short repeats {fmt(best)} us{extra}", med <= PY_PER_CALL_TARGET))
    # The single-get ratios (bench.py, single_get): each in one run, of the
    # minima over short repeats (the figure a loaded machine measures best).
    for m in P["single"]:
        for name, r in m["ratios"].items():
            limit = PY_SINGLE_TARGETS.get(name)
            if limit is not None:
                rows.append((f"{name} ≤ {limit}x (one row per call, same node, minima of short repeats)",
                             f"{m['what']}, {m['ranks']} ranks", f"{r['min']:.2f}x (medians: {r['median']:.2f}x)",
                             r["min"] <= limit))
    # Snapshots (python-ctypes/bench/snapshot.py): against dd on the same directory, same run.
    for m in P["snapshot"]:
        where = f"{m['ranks']} ranks x {m['mib_per_rank']} MiB"
        for what, key, floor in (("dds_save", "save_over_dd_write", "dd_write"), ("dds_load (cold cache)",
                                                                                   "load_over_dd_read", "dd_read")):
            g = m["gb_per_s"]
            op = "save" if floor == "dd_write" else "load"
            rows.append((f"{what} ≥ {SNAPSHOT_TARGET}x the disk's {floor.replace('_', ' ')} (O_DIRECT)", where,
                         f"{m[key]:.2f}x ({g[op]:.2f} vs {g[floor]:.2f} GB/s); restart: from the source "
                         f"{m['restart_from_source_s']:.2f} s, from a snapshot {m['restart_from_snapshot_s']:.2f} s",
                         m[key] >= SNAPSHOT_TARGET))
    groups = []
    for m in P["meas"]:
        if m["group"] not in groups:
            groups.append(m["group"])
    for g in groups:
        for rb in sorted({m["row_bytes"] for m in P["meas"] if m["group"] == g}):
            p = py_find(P, g, "get_batch", rb)
            d = p.get("direct_us_per_row", {}).get("median") if p else None
            c = R.med("store", rb, BATCH, method=g, op="get_batch") if R else None
            if p and d:
                r = p["us_per_row"]["median"] / d
                bench_c = f"; capi-tests/bench, minutes apart: {fmt(c)} us/row" if c else ""
                rows.append((f"{g}: pyddstore get_batch ({BATCH}) per row ≤ {TARGET}x dds_get_batch (same run, "
                             "interleaved)", size_name(rb),
                             f"{r:.2f}x ({fmt(p['us_per_row']['median'])} vs {fmt(d)} us/row{bench_c})",
                             r <= TARGET))
    for on, off in PY_GROUP_OFF.items():
        for rb in sorted({m["row_bytes"] for m in P["meas"] if m["group"] == on}):
            for op in ("get", "get_batch"):
                a, b = py_find(P, on, op, rb), py_find(P, off, op, rb)
                if a and b:
                    x, y = a["us_per_row"]["median"], b["us_per_row"]["median"]
                    rows.append((f"pyddstore {op}: node-local on ({on}) never slower than off ({off})", size_name(rb),
                                 f"{x / y:.2f}x ({fmt(x)} vs {fmt(y)} us/row)", x <= y))
    return rows


def python_section(R, P):
    meta, end = P["meta"], P["end"]
    la0, la1 = meta.get("loadavg_start", [None] * 3), end.get("loadavg_end", [None] * 3)
    L = ["## Python (pyddstore)", "",
         f"The same reads through pyddstore ({meta.get('binding', '?')}; Python {meta.get('python', '?')}, numpy "
         f"{meta.get('numpy', '?')}) into numpy arrays, by python-ctypes/bench/bench.py in the same `make bench` run, "
         f"{meta.get('ranks', '?')} ranks, {meta.get('repeats')} repeats of ≥ {meta.get('min_repeat_ms')} ms, shard "
         f"{size_name(meta.get('shard_bytes', 0))} per rank; {end.get('seconds', '?')} s; load average start "
         f"{la0[0]} {la0[1]} {la0[2]}, end {la1[0]} {la1[1]} {la1[2]}"
         + ("; **quick run**" if meta.get("quick") else "") + ". "
         "Destinations: reused (one array), fresh (`numpy.empty` per call), registered (`register_recv`). "
         "Direct is the same dds_get / dds_get_batch called straight through cffi with the arguments ready, into "
         "the same kind of destination, its repeats interleaved with pyddstore's and with the other group of the "
         "node-local off/on pair (both stores alive): the Python / direct and on / off ratios compare figures "
         "taken under the same load. C is capi-tests/bench's `store` figure of the same group, row size, batch and "
         "destination kind, measured minutes earlier (its destinations are malloc'd; numpy's large arrays start 16 "
         "bytes past a page boundary).", ""]
    if P["skips"]:
        L += [f"- `{s['group']}` skipped: {s['reason']}" for s in P["skips"]] + [""]
    L += ["| target | where | figure | met |", "|---|---|---|---|"]
    for t, where, fig, ok in py_targets(R, P):
        L.append(f"| {t} | {where} | {fig} | {'yes' if ok else '**no**'} |")
    if P["single"]:
        L += ["", "One row per call (bench.py's single-get figures): microseconds per call, rank 0's minimum and "
              "median over short repeats, the paths interleaved in one run. A fresh tensor is `numpy.empty` + get + "
              "`torch.from_numpy`, what a torch sample costs at least.", "",
              "| what | path | min | median |", "|---|---|---:|---:|"]
        for m in P["single"]:
            for path, u in m["us_per_call"].items():
                L.append(f"| {m['what']} | {path} | {fmt(u['min'])} | {fmt(u['median'])} |")
    L += ["", "Microseconds per row per rank (rank 0's median; min and max over its repeats; the largest median of "
          "any rank), Python next to C:", "",
          "| group | row size | op | rows per call | dest | Python | min | max | max over ranks | direct | "
          "Python / direct | C | Python / C | verified |",
          "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in P["meas"]:
        u = m["us_per_row"]
        c = R.med("store", m["row_bytes"], m["batch"], dest=m["dest"], method=m["group"], op=m["op"]) if R else None
        ratio = f"{u['median'] / c:.2f}x" if c else "–"
        d = m.get("direct_us_per_row", {}).get("median")
        dratio = f"{u['median'] / d:.2f}x" if d else "–"
        L.append(f"| {m['group']} | {size_name(m['row_bytes'])} | {m['op']} | {m['batch']} | {m['dest']} | "
                 f"{fmt(u['median'])} | {fmt(u['min'])} | {fmt(u['max'])} | {fmt(u['max_rank_median'])} | {fmt(d)} | "
                 f"{dratio} | {fmt(c)} | {ratio} | {'yes' if m['verified'] else '**NO**'} |")
    return L + [""]


OVERLAP_TARGET = 1.15  # prefetch per step / max(step alone, R) (issue 20)


def cpu_cell(m):
    """Both ranks' CPU in a prefetch loop, in cores (library threads' part)."""
    if "cpu_cores" not in m:
        return "-"
    return f"{m['cpu_cores']:.2f} of {m['machine_cores']} cores ({m['lib_cpu_cores']:.2f})"


def ranks_cell(m):
    """Where each rank may run in an overlap record (the launcher's binding)."""
    n = m.get("affinity_cpus")
    if n is None:
        return "-"
    if n >= m["machine_cores"]:
        return f"unbound (any of {n} CPUs)"
    return f"bound to {n} CPU{'s' if n > 1 else ''}"


def overlap_table(R):
    """The training-loop figure (bench --overlap, capi-tests/bench/bench_overlap.c)."""
    if not R.overlap:
        return ["(not run)"]
    out = ["| method | ranks | request threads | row size | read R | step T | step alone | per step, no prefetch | "
           f"per step, prefetch | prefetch / max(step alone, R) | target <= {OVERLAP_TARGET} | in the library per "
           "step, prefetch (wait + start) | CPU of both ranks, prefetch (library threads) | steps per loop | "
           "CPU stolen by the host | verified |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for m in R.overlap:
        # Older records have no per-repeat ratio: the ratio of the medians.
        ratio = m.get("ratio", m["prefetch_ms"] / max(m["step_alone_ms"], m["read_ms"]))
        met = ratio <= OVERLAP_TARGET
        wait = f"{m['wait_ms']:.3f} ms" if "wait_ms" in m else "-"
        stolen = f"{100 * m['stolen']:.1f}%" if "stolen" in m else "-"
        cpu = cpu_cell(m)
        method = m["method"] + (f", `{m['ucx_settings']}`" if m.get("ucx_settings") else "")
        out.append(f"| {method} | {ranks_cell(m)} | {m.get('priority', 'normal')} | {size_name(m['rb'])} | "
                   f"{m['read_ms']:.3f} ms | {m['step_ms']:.3f} ms | {m['step_alone_ms']:.3f} ms | {m['plain_ms']:.3f} ms | "
                   f"{m['prefetch_ms']:.3f} ms | {ratio:.2f} | {'yes' if met else '**no**'} | {wait} | {cpu} | "
                   f"{m['steps']} | {stolen} | {'yes' if m['verified'] else '**NO**'} |")
    return out


def py_overlap_table(py):
    """The training loop through pyddstore (python-ctypes/bench/bench.py, `overlap`)."""
    if not py or not py["overlap"]:
        return []
    out = ["Through pyddstore (`get_batch_async` before a `time.sleep(T)` step, `req.wait()` after it; "
           "method 0 collective and method 1 on shm, node-local reads off, then on (`+local`); default request "
           "threads; the same repeats and ratio):", "",
           "| method | ranks | row size | read R | step T | step alone | per step, no prefetch | per step, prefetch | "
           f"prefetch / max(step alone, R) | target <= {OVERLAP_TARGET} | CPU of both ranks, prefetch (library "
           "threads) | steps per loop | verified |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for m in py["overlap"]:
        met = m["ratio"] <= OVERLAP_TARGET
        out.append(f"| {m['group']} | {ranks_cell(m)} | {size_name(m['row_bytes'])} | {m['read_ms']:.3f} ms | "
                   f"{m['step_ms']:.3f} ms | "
                   f"{m['step_alone_ms']:.3f} ms | {m['plain_ms']:.3f} ms | {m['prefetch_ms']:.3f} ms | "
                   f"{m['ratio']:.2f} | {'yes' if met else '**no**'} | {cpu_cell(m)} | {m['steps']} | "
                   f"{'yes' if m['verified'] else '**NO**'} |")
    return [""] + out


RAGGED_TARGET = 1.5  # ragged batch / fixed-row batch of the same bytes, per byte (issue 21)


def ragged_table(R):
    """Ragged batches against fixed rows, and metadata (bench --ragged, capi-tests/bench/bench_ragged.c)."""
    if not R.ragged:
        return ["(not run)"]
    out = ["| method | mean sample | ragged batch | bytes | fixed-row batch | bytes | ratio per byte | "
           f"target <= {RAGGED_TARGET} | verified |",
           "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for m in R.ragged:
        met = m["ratio_per_byte"] <= RAGGED_TARGET
        out.append(f"| {m['method']} | {size_name(m['mean_bytes'])} | {m['ragged_ms']:.3f} ms | "
                   f"{m['ragged_batch_bytes'] / 2**20:.2f} MiB | {m['fixed_ms']:.3f} ms | "
                   f"{m['fixed_batch_bytes'] / 2**20:.2f} MiB | {m['ratio_per_byte']:.2f} | "
                   f"{'yes' if met else '**no**'} | {'yes' if m['verified'] else '**NO**'} |")
    mm = R.ragged_meta
    if mm:
        out += ["", f"Metadata for {mm['samples']:,} samples on {mm['ranks']} ranks ({mm['local_samples']:,} per "
                f"rank): resident memory grew by {mm['rss_bytes_per_local_sample']:.1f} B per local sample when the "
                f"variable was registered (the index: {mm['index_bytes_per_local_sample']} B per local sample; the "
                f"two layouts: {mm['layout_bytes']} B). All-gathered record offsets (HydraGNN's record blobs) "
                f"would hold {mm['allgather_bytes_per_rank'] / 2**20:.1f} MiB on every rank."]
    return out


def analysis(perf_md):
    try:
        text = open(perf_md).read()
    except OSError:
        return []
    a, b = "<!-- analysis:begin -->", "<!-- analysis:end -->"
    if a not in text or b not in text:
        return []
    return [text.split(a, 1)[1].split(b, 1)[0].strip()]


# Issue 40's goals for the training loop (python-ctypes/bench/train_loop.py).
TRAIN_EPOCH_GOAL = 1.05  # prefetching pyddstore's epoch / the in-memory limit's, at T >= the read time
TRAIN_EPOCH_GOAL_T0 = 1.25  # the same at T = 0 with 3 KiB rows
# train_loop.py's loader forced onto the per-sample path: a comparison in
# the same run, not a configuration the goals are about.
TRAIN_PER_SAMPLE = " per-sample"
TRAIN_MEM_SLACK = 0.05  # memory per rank <= 1/P of the in-memory limit's + this
TRAIN_BUILD_GOAL = 1.2  # building the store / building the in-memory dataset
TRAIN_HEADER = "## Training loop: epochs against the in-memory limit"


def train_goals(py):
    """Rows of (goal, where, figure, met) for the prefetching pyddstore loaders."""
    rows = []
    reads = {}
    for m in py["train"]:
        if m["step"] == "read":
            reads[m["case"]] = m["step_ms"]
    for m in py["train"]:
        name = m["loader"]
        if not name.startswith(("m0 ", "m1 ")) or (name.endswith(" pf0") and m["case"] != "ragged") \
                or name.endswith(TRAIN_PER_SAMPLE):
            continue
        r, where = m["ratio"], f"{m['case']}, T {m['step']} ({m['step_ms']:.3f} ms), {name}"
        t_read = reads.get(m["case"])
        if m["step_ms"] == 0 and m["case"] == "3KiB":
            rows.append((f"epoch ≤ {TRAIN_EPOCH_GOAL_T0}x the in-memory limit at T = 0", where,
                         f"{r['epoch']:.2f}x", r["epoch"] <= TRAIN_EPOCH_GOAL_T0))
        elif t_read is not None and m["step_ms"] >= t_read:
            rows.append((f"epoch ≤ {TRAIN_EPOCH_GOAL}x the in-memory limit at T ≥ the read time", where,
                         f"{r['epoch']:.2f}x", r["epoch"] <= TRAIN_EPOCH_GOAL))
    seen = set()
    for m in py["train"]:
        name = m["loader"]
        if not name.startswith(("m0 ", "m1 ")) or (m["case"], name.split(" pf")[0]) in seen:
            continue
        seen.add((m["case"], name.split(" pf")[0]))
        where = f"{m['case']}, {name.split(' pf')[0]}"
        limit = 1 / m["ranks"] + TRAIN_MEM_SLACK
        if m["ratio"]["mem"] is not None:
            rows.append((f"memory per rank ≤ 1/P of the in-memory limit's + {TRAIN_MEM_SLACK:.0%}", where,
                         f"{m['ratio']['mem']:.3f}x (goal {limit:.3f}x)", m["ratio"]["mem"] <= limit))
        rows.append((f"building ≤ {TRAIN_BUILD_GOAL}x building the in-memory dataset", where,
                     f"{m['ratio']['build']:.2f}x ({m['build_s']:.3f} s)", m["ratio"]["build"] <= TRAIN_BUILD_GOAL))
    return rows


def train_section(py):
    """The training-loop table (python-ctypes/bench/train_loop.py's records)."""
    if not py or not py["train"]:
        return []
    meta, end = py["trainmeta"], py["trainend"]
    la0, la1 = meta.get("loadavg_start", [None] * 3), end.get("loadavg_end", [None] * 3)
    L = [TRAIN_HEADER, "",
         f"python-ctypes/bench/train_loop.py, {meta.get('date', '?')}, {meta.get('ranks', '?')} ranks on "
         f"{meta.get('cpus', '?')} CPUs, torch {meta.get('torch', '?')}, batch {meta.get('batch', '?')} per rank, "
         f"median of {meta.get('repeats', '?')} epochs per cell; {end.get('seconds', '?')} s; load average start "
         f"{la0[0]} {la0[1]} {la0[2]}, end {la1[0]} {la1[1]} {la1[2]}"
         + ("; **quick run**" if meta.get("quick") else "") + ". "
         "A map-style dataset whose sample i is a function of i, a shuffled DistributedSampler, steps that sleep T "
         "(a GPU step; `read`: the median blocking read of one batch, measured first). Loaders, their epochs taken "
         "in turn: `memory`, the in-memory limit (the whole dataset in torch tensors on every rank, a plain "
         "DataLoader, num_workers=0); `mM mode pfK`, pyddstore.torch's DistDataset (ragged: RaggedDataset) with a "
         "ThreadDataLoader (one thread; pfK: the reads of K batches started ahead, pf0: the thread fetches up to 2 "
         "batches ahead) over method M (0 in the collective or one-sided batch mode, 1 on libfabric "
         f"{meta.get('fabric', 'shm')}); `m0 onesided pfK per-sample`, the same loader with a collate_fn that "
         "only calls default_collate, so it makes the samples and collates them where the others take each field's "
         "batch from the read buffer (a comparison, not in the goals); `memmap`, a plain DataLoader with 2 worker "
         "processes over np.memmap files. "
         "Epoch: time per epoch of the slowest rank; samples/s: all ranks; wait: time blocked in the loader's "
         "next() per step (largest rank mean); memory per rank: VmRSS delta around building the dataset (each side "
         "after gc and malloc_trim; largest rank; a store's shared-memory shard included; memmap: the files' "
         "bytes / P, page cache shared by the ranks); build: from the same per-sample source, barrier to barrier "
         "(in brackets: the time to make an empty store of that kind, timed just before). "
         "Ratios (x) are to `memory` in the same cell. Every batch was checked against the source (4 columns of "
         "every sample and a whole sample per batch).", ""]
    L += ["| goal | where | figure | met |", "|---|---|---|---|"]
    for g, where, fig, ok in train_goals(py):
        L.append(f"| {g} | {where} | {fig} | {'yes' if ok else '**no**'} |")
    L += ["", "| case | T | loader | epoch | x | samples/s | x | wait per step | x | memory per rank | x | build | x | "
          "verified |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in py["train"]:
        r = m["ratio"]
        wx = f"{r['wait']:.2f}" if r.get("wait") is not None else "–"
        mx = f"{r['mem']:.2f}" if r.get("mem") is not None else "–"
        create = f" (empty store {m['store_create_s']:.3f} s)" if m.get("store_create_s") is not None else ""
        L.append(f"| {m['case']} | {m['step']} ({m['step_ms']:.3f} ms) | {m['loader']} | {m['epoch_s']:.3f} s | "
                 f"{r['epoch']:.2f} | {m['samples_per_s']:.0f} | {r['samples_per_s']:.2f} | {m['wait_ms']:.3f} ms | "
                 f"{wx} | {m['mem_bytes'] / 2**20:.1f} MiB | {mx} | {m['build_s']:.3f} s{create} | {r['build']:.2f} | "
                 f"{'yes' if m['verified'] else '**NO**'} |")
    if py["trainparts"]:
        L += ["", "Where one batch's time goes without overlap (medians of blocking calls, slowest rank): pyddstore's "
              "read of every field (`read_rows`; ragged: each field's batched read), the read with the samples made "
              "(`__getitems__`), the default collate of those samples, the read as ThreadDataLoader makes a batch "
              "with the default collate (one tensor per field from the read buffers, no sample objects; fixed rows "
              "only); the in-memory dataset's list of samples and its collate; and the same blocking read through "
              "each store.", "",
              "| case | loader | read | read + samples | collate | read as a batch | memory: samples | "
              "memory: collate | read through each store |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for p in py["trainparts"]:
            each = ", ".join(f"{k} {v:.3f} ms" for k, v in p.get("store_read_ms", {}).items()) or "–"
            batch = f"{p['batch_ms']:.3f} ms" if "batch_ms" in p else "–"
            L.append(f"| {p['case']} | {p['loader']} | {p['read_ms']:.3f} ms | {p['getitems_ms']:.3f} ms | "
                     f"{p['collate_ms']:.3f} ms | {batch} | {p['memory_samples_ms']:.3f} ms | "
                     f"{p['memory_collate_ms']:.3f} ms | {each} |")
    return L + [""]


def replace_train_section(md, py):
    """md's text with its training-loop section replaced by this run's (or
    inserted before the section on reads behind compute, or at the end)."""
    with open(md) as f:
        text = f.read()
    new = "\n".join(train_section(py)) + "\n"
    if TRAIN_HEADER in text:
        head, rest = text.split(TRAIN_HEADER, 1)
        nxt = rest.find("\n## ")
        return head + new + (rest[nxt + 1:] if nxt >= 0 else "")
    anchor = "## Training loop: reads behind compute"
    if anchor in text:
        return text.replace(anchor, new + "\n" + anchor, 1)
    return text.rstrip("\n") + "\n\n" + new


def markdown(R, perf_md, spread=None, py=None):
    meta, end = R.meta, R.end
    la0 = meta.get("loadavg_start", [None] * 3)
    la1 = end.get("loadavg_end", [None] * 3)
    other = f"{100 * end['other_cpu_share']:.1f}%" if "other_cpu_share" in end else "?"
    L = ["# Benchmark results", "",
         "Generated by `make bench` (capi-tests/bench, scripts/bench-report.py); do not edit by hand. "
         "How it is measured: [performance.md](performance.md).", "",
         "| | |", "|---|---|",
         f"| date | {meta.get('date', '?')} |",
         f"| commit | `{commit()}` (libddstore {meta.get('version', '?')}) |",
         f"| machine | {meta.get('cpu', '?')}, {meta.get('cpus', '?')} CPUs, {mem_total_gib():.0f} GiB, "
         f"{platform.system()} {platform.release()} |",
         f"| MPI | {meta.get('mpi', '?')}; UCX_TLS={meta.get('env', {}).get('UCX_TLS', '')}; "
         f"thread level {meta.get('thread_level', '?')} |",
         f"| ranks | {meta.get('ranks', '?')} (both ranks run every configuration at once) |",
         f"| load average (1, 5, 15 min) | start {la0[0]} {la0[1]} {la0[2]}, end {la1[0]} {la1[1]} {la1[2]} (the run itself adds about {meta.get('ranks', '?')}: its ranks poll) |",
         f"| other CPU | {other} of the machine's CPU time during the run went to other processes; "
         f"{end.get('noisy_groups', '?')} groups of measurements stayed above {100 * NOISE_LIMIT:.0f}% after "
         "retries (their figures are marked in bold in the \"other CPU\" column) |",
         f"| settings | {meta.get('repeats')} repeats of ≥ {meta.get('min_repeat_ms')} ms each; shard "
         f"{size_name(meta.get('shard_bytes', 0))} per rank; batch sweep up to {size_name(meta.get('max_batch_bytes', 0))} "
         f"per call; {'quick run' if meta.get('quick') else 'full run'}; {end.get('seconds', '?')} s"
         + (f"; merged from {end['merged_runs']} runs, each group from the quietest" if end.get("merged_runs") else "")
         + " |",
         f"| every read verified | {'yes' if end.get('verified') else '**NO**'} |", ""]
    if R.skips:
        L += ["Skipped methods (probed with `dds_create`):", ""]
        L += [f"- `{s['method']}` (method {s['method_code']}): {s['status']}: {s['reason']}" for s in R.skips]
        L.append("")
    L += ["## Targets", "",
          f"Ratios are store / floor of rank 0's medians (microseconds per row per rank, reused destinations, batch {BATCH}).",
          ""]
    if spread:
        n = spread["runs"]
        L += [f"The figure is from the merged results; the last column gives the ratio's range over the {n} runs "
              "given to the report (each run on its own), and in how many of them the target was met.", "",
              f"| target | where | figure | met | over {n} runs |", "|---|---|---|---|---|"]
    else:
        L += ["| target | where | figure | met |", "|---|---|---|---|"]
    for t, where, fig, ok, ratio in targets(R):
        row = f"| {t} | {where} | {fig} | {'yes' if ok else '**no**'} |"
        if spread:
            got = spread["by"].get((t, where), [])
            if got:
                lo, hi = min(r for r, _ in got), max(r for r, _ in got)
                row += f" {lo:.2f}–{hi:.2f}, met in {sum(1 for _, k in got if k)}/{len(got)} |"
            else:
                row += " – |"
        L.append(row)
    L += ["", "Owner lookup (1M random rows over 100,000 simulated ranks, target < 100 ns/row) is measured by "
          "`cargo bench --bench layout`, not by this program.", ""]
    L += ["## Per row size", "",
          "Microseconds per row per rank: rank 0's median over the repeats, its min and max, and the largest "
          "median of any rank. Floors read the same rows with the same transport and no store logic. "
          "Destinations: reused (one buffer), fresh (malloc per call), registered (`dds_register_recv`), "
          "page+N (one buffer starting N bytes past a page boundary).", ""]
    for rb in R.sizes:
        L += [f"### {size_name(rb)} rows ({rb} bytes)", ""]
        for grp in R.methods:
            L += [f"**{grp}** ({GROUP_NOTE.get(grp, '')}):", ""] + row_table(R, rb, grp) + [""]
    L += ["## Request bytes of method-0 batches", "",
          f"Bytes of requests (per-peer counts and row indices) per rank per `dds_get_batch` of {BATCH} rows, "
          "from `dds_counters.req_bytes_sent` / `req_bytes_recv` (rank 0; the one-sided mode sends none). "
          "See performance.md for the model at larger rank counts.", "",
          "| group | row size | ranks | sent per batch | received per batch |", "|---|---|---|---|---|"]
    for r in R.reqbytes:
        L.append(f"| {r['group']} | {size_name(r['row_bytes'])} | {r['ranks']} | {r['sent_per_batch']:.0f} B | "
                 f"{r['recv_per_batch']:.0f} B |")
    L += [""]
    L += ["## Reader threads (method 1)", "",
          "Each rank reads with 1, 2 or 4 threads at once, each thread with its own reused destination and its own "
          "random rows; the figure is the repeat's wall time divided by the rows of all threads (so a lower figure "
          "with more threads is a higher throughput per rank). The floor is the same raw-transport floor read by "
          "the same number of threads (sharing one endpoint), timed in the same group. The targets above use one "
          "thread.", ""] + thread_table(R) + [""]
    L += ["## dds_get_batch at 200 KiB across destination offsets", "",
          f"Microseconds per row of `dds_get_batch` ({BATCH} rows, rank 0's median) into one reused destination that "
          "starts 0, 16 or 64 bytes past a page boundary (numpy's large arrays start at +16), or where malloc put "
          f"it (reused); worst/best over them, target ≤ {OFFSET_TARGET}x at {size_name(OFFSET_ROW)}. Node-local rows "
          "come from page-aligned shard rows; see performance.md (\"Row copies\") for why the offset mattered.", ""]
    L += offset_table(R) + [""]
    L += ["## Batch sweep", ""] + sweep_table(R) + [""]
    L += ["## Memory", "",
          "Peak resident memory (VmHWM) above the baseline (VmRSS after MPI_Init and dds_create); for `add`, "
          "minus the source buffer. Separate program runs (a peak cannot be reset). VmPTE: the process's page "
          "tables after dds_create and after reading every row of every rank (node-local on: every peer's segment "
          "mapped and touched). 4 KiB pages cost 2 MiB of page tables per GiB mapped, shared-memory huge pages 512 "
          "times less; anonymous (heap) huge pages keep a deposited page table each on x86, so their VmPTE does not "
          "drop (their gain is fewer TLB misses). The row with segments on a huge=advise tmpfs "
          "(scripts/bench-mem-huge.sh, run when `make bench` runs as root; DDSTORE_SHM_DIR there) shows the "
          "library's MADV_HUGEPAGE taking effect; \"segment pages\" is read from /proc/self/smaps of the segment "
          "mappings after reading every row.", ""] + memory_table(R) + [""]
    if py:
        L += python_section(R, py)
        L += train_section(py)
    L += ["## Training loop: reads behind compute", "",
          "Batches of 128 random rows on 2 ranks; each step sleeps T (the median blocking `dds_get_batch`, "
          "measured first), standing for a GPU step that leaves the CPU free. Without prefetch a step reads, then "
          "sleeps (about T + R); with prefetch the next batch's `dds_get_batch_start` is issued before the sleep "
          "and waited for after it. \"Step alone\" is the same loop without reads: what the sleeps cost on this "
          "machine. Five repeats, each measuring R (the blocking read, into the same two destinations the loops "
          "alternate between) beside its loops; the figures are medians over the repeats, and the target is judged "
          "on the median of each repeat's own ratio. A loop runs at least 40 steps and 50 ms. A configuration is "
          "measured up to 3 times while the host took more than 3% of this machine's CPUs (\"steal\" in /proc/stat: "
          "a shared virtual machine), and the least disturbed attempt is shown. "
          "\"CPU of both ranks\": the CPU time both processes used during the prefetch loop per second of it, "
          "in cores (in brackets: the part not on the callers' threads, that is the library's request, progress "
          "and MPI threads); a read hides only in CPU the steps leave free. "
          "T is measured on the freshly filled store, before the repeats, so at 3 KiB it is longer than their R. "
          "\"Request threads\": the Linux policy of the library threads that carry the reads "
          "(`DDSTORE_REQUEST_PRIORITY`): `batch` (the default, `SCHED_BATCH`: a request thread woken by a start "
          "never preempts the caller), `normal` (`SCHED_OTHER`) or `idle` (`SCHED_IDLE`: a caller thread waking "
          "from its step never waits behind a read). "
          "\"Ranks\": the CPUs each rank may run on. `make bench` runs the figure twice: with plain `mpiexec -n 2` "
          "(MPICH leaves the ranks unbound), then with `mpiexec -bind-to core` (each rank bound to one core, as "
          "`srun --cpu-bind=cores` or Open MPI's default for two ranks bind them; `batch` request threads only). "
          "Bound, a start wakes its request thread on the caller's own core; unbound, the wake-up crosses to "
          "another core (performance.md, \"Where the time goes\"). "
          "Last, `mpi onesided` once more each way with `UCX_MM_FIFO_SIZE=512` (named in the method column): UCX's "
          "shared-memory receive queues of 512 entries of up to 8 KiB instead of 64, so that an owner that is "
          "computing most likely answers up to 4 MiB of gets per MPI progress call instead of 512 KiB (../c-api.md, "
          "\"Overlapping reads with compute\"). "
          "(capi-tests/bench/bench_overlap.c; see ../c-api.md, \"Overlapping reads with compute\".)", ""] + overlap_table(R) \
        + py_overlap_table(py) + [""]
    L += ["## Ragged variables", "",
          "Batches of 128 random samples of a ragged variable whose lengths vary 1-10x around the mean, against "
          "batches of 128 random rows of a fixed-row variable (row = the ragged pool's mean sample) in the same "
          "store, compared per byte moved; node-local reads off except `mpi+local`. "
          "(capi-tests/bench/bench_ragged.c; see [ragged.md](../ragged.md).)", ""] + ragged_table(R) + [""]
    an = analysis(perf_md)
    if an:
        L += ["## Where the time goes", "", "(From [performance.md](performance.md#where-the-time-goes), written "
              "by hand for the run it names.)", ""] + an + [""]
    L.append("![us per row against row size](results.png)")
    return "\n".join(L) + "\n"


def plot_lines(R, pred):
    """(label, is_store, group, path) of the lines to draw among records matching
    `pred`: one per store group, one per floor (from the first group timing it)."""
    lines, floors_seen = [], set()
    for m in R.meas:
        if not pred(m):
            continue
        if m["kind"] == "store":
            key = (f"store ({m['group']})", True, m["group"], "store")
        else:
            if m["path"] in floors_seen:
                continue
            floors_seen.add(m["path"])
            key = (f"floor: {m['path']}", False, m["group"], m["path"])
        if key not in lines:
            lines.append(key)
    return lines


def plot(R, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(18, 6))
    panels = [("single rows (dds_get; floors: batch 1)", 1, "get"), (f"batches of {BATCH} (dds_get_batch)", BATCH, "get_batch")]
    for ax, (title, batch, op) in zip(axes, panels):
        pred = lambda m: m["batch"] == batch and m["dest"] == "reused" and m["op"] == op and threads(m) == 1
        for label, is_store, grp, path in plot_lines(R, pred):
            pts = [(rb, R.med(path, rb, batch, op=op, group=grp)) for rb in R.sizes]
            pts = [(x, y) for x, y in pts if y is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if is_store else "s--",
                    lw=2.2 if is_store else 1.2, ms=5 if is_store else 4, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("row size")
        ax.set_ylabel("us per row per rank (median)")
        ax.set_title(title)
        ax.set_xticks(R.sizes)
        ax.set_xticklabels([size_name(s) for s in R.sizes])
        ax.minorticks_off()
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    ax = axes[2]
    mid = R.sizes[1] if len(R.sizes) > 1 else R.sizes[0]
    pred = lambda m: m["row_bytes"] == mid and m["op"] == "get_batch" and m["dest"] == "reused" and threads(m) == 1
    for label, is_store, grp, path in plot_lines(R, pred):
        pts = sorted((m["batch"], m["us_per_row"]["median"]) for m in R.meas
                     if pred(m) and m["path"] == path and m.get("group") == grp)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if is_store else "s--",
                lw=2.2 if is_store else 1.2, ms=5 if is_store else 4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (rows per call)")
    ax.set_ylabel("us per row per rank (median)")
    ax.set_title(f"batch sweep, {size_name(mid)} rows")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    meta, end = R.meta, R.end
    other = f", other CPU {100 * end['other_cpu_share']:.0f}%" if "other_cpu_share" in end else ""
    fig.suptitle(f"libddstore {meta.get('version', '')} @ {commit()}: {meta.get('ranks', '?')} ranks, "
                 f"{meta.get('cpu', '')} ({meta.get('cpus', '?')} CPUs), {meta.get('date', '')}{other}. "
                 "Solid: store; dashed: floors (same rows, raw transport)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="*",
                    help="JSON lines written by capi-tests/bench; several runs are merged group by group, "
                         "keeping for each group the run with the least CPU taken by other processes")
    ap.add_argument("--python", help="records of python-ctypes/bench/bench.py from the same run (section Python)")
    ap.add_argument("--md", default="docs/dev/results.md")
    ap.add_argument("--png", default="docs/dev/results.png")
    ap.add_argument("--perf-md", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "dev",
                                                      "performance.md"),
                    help="page whose analysis section is copied into the results")
    ap.add_argument("--train-only", action="store_true",
                    help="replace only the training-loop section of --md with --python's records "
                         "(python-ctypes/bench/train_loop.py run on its own; no C results needed)")
    args = ap.parse_args()
    if args.train_only:
        if not args.python:
            sys.exit("--train-only needs --python (the records of train_loop.py)")
        py = py_load(args.python)
        if not py["train"]:
            sys.exit(f"{args.python}: no training-loop records")
        text = replace_train_section(args.md, py)
        with open(args.md, "w") as f:
            f.write(text)
        print(f"wrote the training-loop section of {args.md}")
        for g, where, fig, ok in train_goals(py):
            print(f"{'met   ' if ok else 'MISSED'} {g} [{where}]: {fig}")
        return
    if not args.results:
        sys.exit("no results given (JSON lines of capi-tests/bench)")
    runs = [load(f) for f in args.results]
    R = Results(merge(runs))
    spread = None
    if len(runs) > 1:
        spread = {"runs": len(runs), "by": {}}
        for recs in runs:
            for t, where, _, ok, ratio in targets(Results(recs)):
                spread["by"].setdefault((t, where), []).append((ratio, ok))
    global NOISE_LIMIT
    NOISE_LIMIT = R.end.get("max_noise", NOISE_LIMIT)
    if not R.meas:
        sys.exit(f"{' '.join(args.results)}: no measurements")
    # Made before the file is opened: opening it truncates it, and the
    # header's commit would then always read "-dirty".
    text = markdown(R, args.perf_md, spread, py_load(args.python) if args.python else None)
    with open(args.md, "w") as f:
        f.write(text)
    if args.png:
        plot(R, args.png)
    print(f"wrote {args.md}" + (f" and {args.png}" if args.png else ""))
    for t, where, fig, ok, _ in targets(R):
        print(f"{'met   ' if ok else 'MISSED'} {t} [{where}]: {fig}")
    if args.python:
        for t, where, fig, ok in py_targets(R, py_load(args.python)):
            print(f"{'met   ' if ok else 'MISSED'} {t} [{where}]: {fig}")


if __name__ == "__main__":
    main()
