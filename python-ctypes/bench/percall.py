"""Where the time of one small pyddstore read goes (docs/dev/performance.md,
"The Python binding's cost per call").

    mpiexec -n 2 python python-ctypes/bench/percall.py [--calls N] [--repeats N]

Every rank reads 8-byte rows of its own shard (node-local, a plain copy in
the library) with method 0, so the figure is the fixed cost of a call: the
binding's work plus the library's own. Then the pieces the binding does per
call are timed alone: the raw C call with ready arguments, argument
conversion and checks, the numpy address, the profiling switch. Each figure
is the minimum over many short repeats of the mean of `calls` calls (the
minimum, since other processes on the machine only ever add time; short, so
that some repeats run within one time slice of a loaded machine). Prints one line per
piece on rank 0; with --json, one JSON object per piece.
"""

import argparse
import json
import os
import sys
import time
import timeit

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree's pyddstore first
import pyddstore as dds  # noqa: E402
from pyddstore import _buffers, _lib  # noqa: E402


def per_call(fn, calls, repeats):
    """Minimum over `repeats` of the mean microseconds of `calls` calls of fn()."""
    timer = timeit.Timer(fn)
    best = min(timer.repeat(repeat=repeats, number=calls))
    return best / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    me = comm.rank
    store = dds.PyDDStore(comm, method=0, batch_mode="onesided")  # get_batch without a collective
    rows = 1024
    store.add("v", np.arange(rows, dtype=np.int64).reshape(rows, 1) + me * rows)
    dst = np.zeros((1, 1), np.int64)
    start = me * rows + 5  # a row of this rank: node-local
    store.get("v", dst, start)
    assert dst[0, 0] == start
    idx = np.array([start], np.int64)
    lib = store._lib
    var = store._var("v")
    h = store._h
    c, n = args.calls, args.repeats
    cffi = getattr(_lib, "ffi", None)

    pieces = []

    def add(name, fn):
        comm.Barrier()
        pieces.append((name, per_call(fn, c, n)))

    add("store.get(name, arr, start): the whole call", lambda: store.get("v", dst, start))
    add("store.get_batch(name, arr, int64 indices), 1 row", lambda: store.get_batch("v", dst, idx))
    if cffi is None:  # the ctypes binding
        ptr = _buffers.address(dst)
        add("raw C call (ctypes, int address, bytes name)", lambda: lib.dds_get(h, var.cname, ptr, 8, start, 1))
        add("a C call with one int argument (dds_status_string(0))", lambda: lib.dds_status_string(0))
        iptr = _buffers.address(idx)
        add("raw C get_batch, 1 row (ctypes)", lambda: lib.dds_get_batch(h, var.cname, ptr, 8, iptr, 1))
        add("arr.ctypes.data", lambda: dst.ctypes.data)
        add("arr.__array_interface__['data'][0]", lambda: dst.__array_interface__["data"][0])
        add("addressof(c_char.from_buffer(arr)) (_buffers.address)", lambda: _buffers.address(dst))
        add("extract(arr) (_buffers: type, dtype, flags, address)",
            lambda: _buffers.extract(dst, "arr", writable=True))
    else:  # the cffi binding
        ptr = cffi.from_buffer(dst)
        chars = cffi.typeof("char[]")
        add("raw C call (cffi, cdata pointer, bytes name)", lambda: lib.dds_get(h, var.cname, ptr, 8, start, 1))
        add("raw C call, pointer made per call (from_buffer)",
            lambda: lib.dds_get(h, var.cname, cffi.from_buffer(chars, dst, True), 8, start, 1))
        add("a C call with one int argument (dds_status_string(0))", lambda: lib.dds_status_string(0))
        iptr = cffi.from_buffer("int64_t[]", idx)
        add("raw C get_batch, 1 row (cffi)", lambda: lib.dds_get_batch(h, var.cname, ptr, 8, iptr, 1))
        add("ffi.from_buffer(arr)", lambda: cffi.from_buffer(dst))
        add("ffi.from_buffer(arr, require_writable=True)", lambda: cffi.from_buffer(dst, require_writable=True))
        add("arr.ctypes.data", lambda: dst.ctypes.data)
        add("arr.__array_interface__['data'][0]", lambda: dst.__array_interface__["data"][0])
    if cffi is not None:
        add("ffi.from_buffer(char[], arr, True) (writable, positional: what get uses)",
            lambda: cffi.from_buffer(chars, dst, True))
    add("store._vars.get(name) (variable cache)", lambda: store._vars.get("v"))
    add("arr.flags.c_contiguous and arr.flags.writeable", lambda: dst.flags.c_contiguous and dst.flags.writeable)
    add("arr.dtype in HOST_DTYPES", lambda: dst.dtype in _buffers.HOST_DTYPES)
    add("arr.shape[0], arr.nbytes, arr.itemsize", lambda: (dst.shape[0], dst.nbytes, dst.itemsize))
    add("profiling switch (self._prof twice)", lambda: store._prof or store._prof)
    add("time.perf_counter() (what profiling adds, twice per call)", time.perf_counter)
    add("an empty Python call (lambda: None)", lambda: None)
    add("np.empty((1, 1), int64) (a fresh destination)", lambda: np.empty((1, 1), np.int64))

    store.free()
    if me == 0:
        print(f"# pyddstore {dds.__version__}, {comm.size} rank(s), {'cffi' if cffi else 'ctypes'} binding, "
              f"python {sys.version.split()[0]}, numpy {np.__version__}; min over {n} repeats of {c} calls")
        for name, us in pieces:
            if args.json:
                print(json.dumps({"piece": name, "us": round(us, 4), "ranks": comm.size,
                                  "binding": "cffi" if cffi else "ctypes"}))
            else:
                print(f"{us:8.3f} us  {name}")


if __name__ == "__main__":
    main()
