"""DistDatasetReader: a method-2 extra member reading a dataset that a
DistDataset core group published (DDStore 3.0's test_method2_reader*).

Rank 0 plays the separate job: it creates the reader in the same process
as its core member. With a library that does not serve method 2 the
DistDataset constructor must refuse it on every rank, and that is what
these tests check instead.
"""

import json
import os
import time

import torch

from helpers import METHODS, agree, handshake_dir
from pyddstore.torch import DistDataset, DistDatasetReader, ThreadDataLoader, _safe_name
from torch_helpers import (
    N, Checks, Labeled, RecordSource, decode_labeled, encode_labeled, expected_labeled, teardown,
)

HAVE_METHOD2 = 2 in METHODS


def core(comm, source, name, hs, **kw):
    return DistDataset(source, name, comm=comm, method=2, handshake_dir=hs, **kw)


def unavailable(comm, hs):
    c = Checks()
    c.raises(NotImplementedError, lambda: core(comm, RecordSource("dict"), "m2", hs), "method 2 refused")
    c.true(not os.path.exists(os.path.join(hs, _safe_name("m2") + ".meta.json")), "meta file of a refused store")
    assert agree(comm, c.ok), c.errors


def test_method2_reader(comm):
    hs = handshake_dir("-reader")
    if not HAVE_METHOD2:
        return unavailable(comm, hs)
    src = RecordSource("dict")
    ds = core(comm, src, "m2/recs.v1", hs)
    c = Checks()
    if comm.rank == 0:
        # The schema is published before the variables, in <readable part>-<hash>.meta.json.
        with open(os.path.join(hs, _safe_name("m2/recs.v1") + ".meta.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
        c.true(meta["total_ns"] == N and meta["structure"] == "dict" and meta["keys"] == ["rec", "t"],
               f"meta {meta}")
        c.true(meta["fields"] == ds.schema["fields"], "meta fields")
        reader = DistDatasetReader("m2/recs.v1", handshake_dir=hs, n_core=comm.size)
        c.true(len(reader) == N and reader.len() == N, f"len {len(reader)}")
        c.true(reader.shapes == ds.shapes and reader.dtypes == ds.dtypes, "shapes, dtypes")
        for i in range(N):
            c.same(reader[i], src[i], f"reader[{i}]")
        c.same(reader.__getitems__(range(N)[::-1]), [src[i] for i in range(N)[::-1]], "__getitems__")
        rows = reader.read_rows([3, 36], fields=["t"])
        c.same(rows, {"t": torch.stack([src[3]["t"], src[36]["t"]])}, "read_rows")
        bufs = reader.alloc(8)
        loader = ThreadDataLoader(reader, batch_size=8, num_workers=2, reuse_buffers=True,
                                  collate_fn=lambda b: [{"rec": s["rec"].copy(), "t": s["t"].clone()} for s in b],
                                  collate_copies=True)
        c.same([s for b in loader for s in b], [src[i] for i in range(N)], "loader with reused buffers")
        loader.close()
        reader.release(bufs)
        reader.ddstore.free()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


class Offset:
    """Samples i + base (two datasets that must not be confused)."""

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.tensor([float(i + self.base)])


def test_method2_similar_names_do_not_collide(comm):
    """'a.b' and 'a_b' publish their schemas in one hand-shake directory
    without overwriting each other (they once mapped to the same file)."""
    hs = handshake_dir("-names")
    if not HAVE_METHOD2:
        return unavailable(comm, hs)
    c = Checks()
    c.true(_safe_name("a.b") != _safe_name("a_b"), f"{_safe_name('a.b')} == {_safe_name('a_b')}")
    dot = core(comm, Offset(0), "a.b", hs)
    und = core(comm, Offset(1000), "a_b", hs)
    if comm.rank == 0:
        metas = sorted(f for f in os.listdir(hs) if f.endswith(".meta.json"))
        c.true(len(metas) == 2, f"meta files {metas}")
        for name, base in (("a.b", 0), ("a_b", 1000)):
            reader = DistDatasetReader(name, handshake_dir=hs, n_core=comm.size)
            for i in (0, N - 1):
                c.same(reader[i], torch.tensor([float(i + base)]), f"{name}[{i}]")
            reader.ddstore.free()
    teardown(comm, und)
    teardown(comm, dot)
    assert agree(comm, c.ok), c.errors


def test_method2_reader_decode(comm, monkeypatch):
    """The core group encodes, the reader decodes; n_core from DDSTORE_N_CORE."""
    hs = handshake_dir("-decode")
    if not HAVE_METHOD2:
        return unavailable(comm, hs)
    ds = core(comm, Labeled(), "lab", hs, encode=encode_labeled, chunk_size=5)
    c = Checks()
    if comm.rank == 0:
        monkeypatch.setenv("DDSTORE_N_CORE", str(comm.size))
        monkeypatch.setenv("DDSTORE_HANDSHAKE_DIR", hs)
        reader = DistDatasetReader("lab", decode=decode_labeled)
        c.same(reader[3], expected_labeled(3), "reader[3]")
        c.same(reader.__getitems__(range(N)), [expected_labeled(i) for i in range(N)], "all samples")
        reader.ddstore.free()
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors


def test_method2_width_must_be_the_whole_communicator(comm):
    c = Checks()
    if comm.size > 1:
        c.raises(NotImplementedError, lambda: core(comm, Labeled(), "w", handshake_dir("-w"),
                                                   encode=encode_labeled, ddstore_width=1), "width 1")
    assert agree(comm, c.ok), c.errors


def test_reader_arguments(comm, monkeypatch):
    """Errors found before any store exists (method 2 or not)."""
    hs = handshake_dir("-args")
    c = Checks()
    monkeypatch.delenv("DDSTORE_N_CORE", raising=False)
    c.raises(ValueError, lambda: DistDatasetReader("x", handshake_dir=hs), "no n_core", match="DDSTORE_N_CORE")
    # Bad values: the library's rules, errors naming the variable.
    import pyddstore
    for raw in ("two", "0", "-1"):
        monkeypatch.setenv("DDSTORE_N_CORE", raw)
        c.raises(pyddstore.InvalidArgumentError, lambda: DistDatasetReader("x", handshake_dir=hs),
                 f"DDSTORE_N_CORE={raw}", match="DDSTORE_N_CORE")
    monkeypatch.delenv("DDSTORE_N_CORE")
    for raw in ("soon", "-1", "1e300"):
        monkeypatch.setenv("DDSTORE_HANDSHAKE_TIMEOUT_S", raw)
        c.raises(pyddstore.InvalidArgumentError, lambda: DistDatasetReader("x", handshake_dir=hs, n_core=1),
                 f"DDSTORE_HANDSHAKE_TIMEOUT_S={raw}", match="DDSTORE_HANDSHAKE_TIMEOUT_S")
    monkeypatch.setenv("DDSTORE_HANDSHAKE_TIMEOUT_S", "0.2")
    t0 = time.monotonic()
    err = c.raises(TimeoutError, lambda: DistDatasetReader("never", handshake_dir=hs, n_core=1),
                   "nothing published", match="never")
    c.true(err is None or hs in str(err), "the message names the directory")
    c.true(time.monotonic() - t0 < 10, "the timeout is honoured")
    assert agree(comm, c.ok), c.errors
