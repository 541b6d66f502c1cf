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
