"""Run with an mpi4py and a libddstore built against different MPIs (make
test-openmpi does both pairings, as a singleton):

    python mpi_mismatch.py OURS OTHER

where OURS and OTHER name the MPI family libddstore was built with and the
caller's one ("MPICH", "Open MPI"; compared without case, so a path such as
libmpich.so.12 names MPICH too). dds_create must refuse
with BadStateError naming both, instead of crashing inside MPI or reporting
that nobody initialised MPI. Exits 0 when it does.
"""

import sys

from mpi4py import MPI

import pyddstore as dds

ours, other = sys.argv[1], sys.argv[2]
print("mpi4py uses:", MPI.Get_library_version().splitlines()[0])
try:
    dds.PyDDStore(MPI.COMM_WORLD)
except dds.BadStateError as e:
    print("refused:", e)
    msg = str(e).lower()
    words = [w.lower() for w in ("another MPI library is loaded", ours, other, "docs/troubleshooting.md")]
    missing = [w for w in words if w not in msg]
    if missing:
        sys.exit(f"mpi_mismatch: the message lacks {missing}")
    # It says which is which: libddstore's MPI before "another MPI library",
    # the caller's after it.
    pivot = msg.index("another mpi library")
    if msg.index(ours.lower()) > pivot or msg.rindex(other.lower()) < pivot:
        sys.exit(f"mpi_mismatch: {ours!r} should be named as libddstore's MPI, {other!r} as the other")
    print("mpi_mismatch: 1 passed, 0 failed")
else:
    sys.exit("mpi_mismatch: dds_create accepted a communicator of a different MPI")
