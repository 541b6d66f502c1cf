"""Node-local reads (DDSTORE_NODE_LOCAL, on by default): every row owned by a
rank of the reader's node is copied straight from the owner's shared memory
and counts in the C counters' rows_local (get_profile keeps DDStore 3.0's
keys, so the test reads dds_profile itself); with DDSTORE_NODE_LOCAL=0 only
a rank's own rows do. Method 2's core members (one-sided like method 1) do
the same. The node of each rank comes from MPI (Split_type), so this holds
on one node (every row local) and across nodes (scripts/cluster/)."""


import numpy as np
import pytest
from mpi4py import MPI

from helpers import METHODS, agree, make_store
from pyddstore import _lib

ROWS, COLS = 8, 3


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("setting", [None, "0"])
def test_rows_local_counts(comm, method, setting, monkeypatch):
    if setting is None:
        monkeypatch.delenv("DDSTORE_NODE_LOCAL", raising=False)
    else:
        monkeypatch.setenv("DDSTORE_NODE_LOCAL", setting)
    store = make_store(comm, method)
    first = comm.rank * ROWS
    rows = np.arange(first, first + ROWS, dtype=np.float64)[:, None] * 10 + np.arange(COLS)
    store.add("nl", rows)
    comm.Barrier()
    total = ROWS * comm.size
    idx = np.random.default_rng(comm.rank).permutation(total)
    out = np.zeros((total, COLS))
    store.get_batch("nl", out, idx)
    ok = np.array_equal(out, idx[:, None] * 10.0 + np.arange(COLS))
    c = _lib.ffi.new("dds_counters *")
    c.struct_size = _lib.ffi.sizeof("dds_counters")
    assert store._lib.dds_profile(store._handle(), store._var("nl").cname, c) == 0
    prof = {"rows": c.rows, "rows_local": c.rows_local, "rows_remote": c.rows_remote}
    own = int(np.count_nonzero((idx >= first) & (idx < first + ROWS)))
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, comm.rank)
    node_leader = np.array(comm.allgather(node.allreduce(comm.rank, op=MPI.MIN)))
    node.Free()
    same_node = int(np.count_nonzero(node_leader[idx // ROWS] == node_leader[comm.rank]))
    want_local = own if setting == "0" else same_node
    ok = ok and prof["rows"] == total and prof["rows_local"] == want_local
    ok = ok and prof["rows_remote"] == total - want_local
    comm.Barrier()
    store.free()
    assert agree(comm, ok), (prof, want_local)


def _gone_pid():
    """The pid of a process that has exited (and been reaped)."""
    import subprocess
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_segments_are_removed_by_create(comm, tmp_path, monkeypatch):
    """Issue 35: a segment whose creating process is gone
    (ddstore.<pid>.<n>, owned by us) is removed by the next store made on the
    node, in DDSTORE_SHM_DIR and in /dev/shm; one of a live process, and
    other names, stay."""
    import os
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setenv("DDSTORE_SHM_DIR", str(shm))
    dead = _gone_pid()
    stale = [shm / f"ddstore.{dead}.{comm.rank}", f"/dev/shm/ddstore.{dead}.{900000 + comm.rank}"]
    live = [shm / f"ddstore.{os.getpid()}.{800000 + comm.rank}", shm / f"ddstore.1.{comm.rank}",
            shm / f"ddstore.{dead}.x"]
    for f in stale + live:
        with open(f, "wb") as out:
            out.write(b"x")
    comm.Barrier()
    store = make_store(comm, 0)
    store.free()
    ok = not any(os.path.exists(f) for f in stale) and all(os.path.exists(f) for f in live)
    for f in stale + live:
        if os.path.exists(f):
            os.unlink(f)
    assert agree(comm, ok)


def test_cleanup_command(comm, tmp_path):
    """`python -m pyddstore.cleanup [--dry-run] DIR`: the same rule by hand."""
    import os
    import subprocess
    import sys
    d = tmp_path / "c"
    d.mkdir()
    dead = _gone_pid()
    gone, mine, other = d / f"ddstore.{dead}.3", d / f"ddstore.{os.getpid()}.3", d / f"x.{dead}.3"
    for f in (gone, mine, other):
        f.write_bytes(b"x")
    run = lambda *a: subprocess.run([sys.executable, "-m", "pyddstore.cleanup", *a, str(d)],  # noqa: E731
                                    capture_output=True, text=True, check=True).stdout
    dry = run("--dry-run")
    ok = dry.strip() == f"would remove {gone}" and gone.exists()
    out = run()
    ok = ok and out.strip() == f"removed {gone}" and not gone.exists() and mine.exists() and other.exists()
    assert agree(comm, ok), (dry, out)
