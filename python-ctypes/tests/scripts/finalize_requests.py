"""MPI_Finalize with batched reads in flight (issue 35). Run:

    mpiexec -n 2 python finalize_requests.py exit|explicit

Every rank starts 8 ``get_batch_async`` reads of the next rank's rows and
waits for none.

``exit`` (with DDSTORE_TEST_REQUEST_DELAY_S, so that they are still in
flight): the script just ends, the requests still referenced. pyddstore waits for its requests at exit,
before mpi4py's MPI_Finalize (without that, MPI_Finalize ran with reads on
library threads and MPICH aborted); a handler registered before the reads
(so run after pyddstore's, before mpi4py's) checks every array holds its rows.

``explicit``: MPI.Finalize() is called with them in flight; afterwards each
wait raises BadStateError "MPI was finalized with this request in flight"
(one-sided reads: methods 1, method 0 one-sided) or returns with the rows
(the collective mode runs its queue to the end), and the store frees. With
DDSTORE_TEST_REQUEST_DELAY_S, which keeps the requests queued, every
one-sided one is refused; without it they are running inside MPI when
MPI.Finalize() is called (pyddstore routes it through libddstore's
MPI_Finalize, which stops them first: before, MPICH aborted in 3 of 6 runs
of the collective mode), and each is refused or has its rows.
Method: $PYDDSTORE_TEST_METHOD (default 0); node-local reads off.
"""

import atexit
import os
import sys

os.environ["DDSTORE_NODE_LOCAL"] = "0"

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pyddstore as dds  # noqa: E402

METHOD = int(os.environ.get("PYDDSTORE_TEST_METHOD", "0"))
ROWS, COLS, NREQ, PER = 2048, 64, 8, 512
# Alive until the interpreter exits, as a prefetching loader's requests are.
KEEP = []


def main(how):
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    store = dds.PyDDStore(comm, method=METHOD)
    store.add("x", (np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS) + rank * ROWS * COLS))
    collective = METHOD == 0 and os.environ.get("DDSTORE_BATCH_MODE", "collective") == "collective"
    peer = (rank + 1) % size
    jobs = []
    for k in range(NREQ):
        idx = peer * ROWS + (k * PER // 2 + PER - 1 - np.arange(PER)) % ROWS
        arr = np.zeros((PER, COLS), np.float64)
        want = (idx[:, None] * COLS + np.arange(COLS)).astype(np.float64)
        jobs.append((arr, want, idx))
    failures = []

    def check_rows():
        bad = [k for k, (arr, want, _) in enumerate(jobs) if not np.array_equal(arr, want)]
        print(f"finalize_requests.py exit rank {rank}: {NREQ - len(bad)} of {NREQ} reads landed", flush=True)
        if bad:
            os._exit(1)  # mpi4py's finalize must not turn this into success

    if how == "exit":
        atexit.register(check_rows)
    reqs = [store.get_batch_async("x", arr, idx) for arr, _, idx in jobs]
    if how == "exit":
        KEEP.extend([store, reqs])
        return 0
    MPI.Finalize()
    ran = refused = 0
    for (arr, want, _), r in zip(jobs, reqs):
        try:
            r.wait()
            ran += 1
            if not np.array_equal(arr, want):
                failures.append("a read that returned holds wrong rows")
        except dds.BadStateError as e:
            refused += 1
            if "MPI was finalized with this request in flight" not in str(e):
                failures.append(f"unexpected message: {e}")
    if collective and ran != NREQ:
        failures.append(f"collective mode: {ran} of {NREQ} reads ran")
    queued = float(os.environ.get("DDSTORE_TEST_REQUEST_DELAY_S", "0")) > 0
    if not collective and queued and refused != NREQ:
        failures.append(f"one-sided reads: {refused} of {NREQ} refused (the delay keeps them queued)")
    try:
        reqs[0].wait()
        failures.append("a second wait did not raise")
    except dds.BadStateError:
        pass
    store.free()
    print(f"finalize_requests.py explicit rank {rank}: {ran} ran, {refused} refused; failures: {failures}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
