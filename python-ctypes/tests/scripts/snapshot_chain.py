"""The train.py of docs/snapshots.md's Slurm job chain, run by run-tests.sh:
a first job builds the store and saves it (--build-from, --save), a later
job on another number of ranks loads it (--restore); each checks the rows.

    mpiexec -n 2 python snapshot_chain.py --build-from SRC --save DIR
    mpiexec -n 3 python snapshot_chain.py --restore DIR
"""

import argparse

import numpy as np
from mpi4py import MPI

import pyddstore

ROWS, ELEMS = 1000, 4


def build_my_shard():
    """This rank's share of the source: global row g holds g in every element."""
    comm = MPI.COMM_WORLD
    lo, hi = comm.rank * ROWS // comm.size, (comm.rank + 1) * ROWS // comm.size
    return np.repeat(np.arange(lo, hi, dtype=np.float64)[:, None], ELEMS, axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restore")
    ap.add_argument("--build-from")
    ap.add_argument("--save")
    args = ap.parse_args()
    # [snippet:snapshot-chain]
    store = pyddstore.PyDDStore(MPI.COMM_WORLD)
    if args.restore:
        store.load(args.restore)  # every variable of the snapshot
    else:
        store.add("x", build_my_shard())
        store.save(args.save)  # every variable; store.save(dir, ["x"]) names some
    # [end-snippet]
    out = np.empty((1, ELEMS))
    for g in range(0, ROWS, 37):
        store.get("x", out, g)
        if not (out == g).all():
            raise SystemExit(f"snapshot_chain: row {g} wrong on rank {MPI.COMM_WORLD.rank}: {out}")
    MPI.COMM_WORLD.Barrier()
    if MPI.COMM_WORLD.rank == 0:
        print(f"snapshot_chain: {'restored' if args.restore else 'built and saved'} on "
              f"{MPI.COMM_WORLD.size} rank(s), rows verified")
    store.free()


if __name__ == "__main__":
    main()
