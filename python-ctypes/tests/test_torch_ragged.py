"""pyddstore.torch.RaggedDataset (issue 21): graph samples (x [n, f],
pos [n, 3], edge_index [2, e], scalar y) from a list of dicts in one call,
read back in batches and one at a time, every value checked, on every
available method; ranks without samples; a DataLoader over it."""

import numpy as np
import pytest
import torch

from pyddstore.torch import RaggedDataset
from helpers import METHODS, make_store

F = 4


def graph(g):
    n = 0 if g % 5 == 3 else 1 + (g * 7) % 9
    e = 2 * n + (g % 3)
    rng = np.random.default_rng(g)
    return {
        "x": torch.from_numpy(rng.standard_normal((n, F)).astype(np.float32)),
        "pos": torch.from_numpy(rng.standard_normal((n, 3))),
        "edge_index": torch.from_numpy(rng.integers(0, max(n, 1), size=(2, e))),
        "y": torch.tensor(float(g)),
    }


def local_ids(comm):
    r, p = comm.Get_rank(), comm.Get_size()
    counts = [0 if (p > 1 and q == p - 1) else 6 + q for q in range(p)]  # the last rank holds none
    first = sum(counts[:r])
    return list(range(first, first + counts[r])), sum(counts)


def same(a, b):
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("method", METHODS)
def test_graphs_roundtrip(comm, method):
    store = make_store(comm, 2) if method == 2 else None  # method 2 needs a hand-shake directory
    ds = RaggedDataset([graph(g) for g in local_ids(comm)[0]], "g", comm, store=store, method=method)
    total = local_ids(comm)[1]
    assert len(ds) == total
    assert ds.schema["x"][1] == 0 and ds.schema["edge_index"][1] == 1 and ds.schema["y"][1] is None
    idx = list(range(total))[::-1] + [1, 1, total - 1]
    batch = ds.get_batch(idx)
    assert all(same(s, graph(g)) for g, s in zip(idx, batch))
    assert same(ds[3], graph(3))
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, collate_fn=lambda b: b,
                                         generator=torch.Generator().manual_seed(1))
    seen = 0
    for b in loader:
        seen += len(b)
        assert all(s["x"].shape[1] == F and s["edge_index"].shape[0] == 2 for s in b)
    assert seen == total
    ds.free()
    if method == 2:
        store.free()


def test_torch_geometric_optional(comm):
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            RaggedDataset([graph(g) for g in local_ids(comm)[0]], "g", comm, as_data=True)
        return
    ds = RaggedDataset([graph(g) for g in local_ids(comm)[0]], "g", comm, as_data=True)
    d = ds[2]
    assert torch.equal(d.x, graph(2)["x"]) and torch.equal(d.edge_index, graph(2)["edge_index"])
    ds.free()
