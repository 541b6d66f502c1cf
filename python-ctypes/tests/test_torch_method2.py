"""DistDatasetReader: a method-2 extra member reading a dataset that a
DistDataset core group published (DDStore 3.0's test_method2_reader*).

Rank 0 plays the separate job: it creates the reader in the same process
as its core member. With a library that does not serve method 2 the
DistDataset constructor must refuse it on every rank, and that is what
these tests check instead.
"""

import glob
import json
import os
import stat
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
    c.true(not glob.glob(os.path.join(hs, "*.ddsblob")), "schema blob of a refused store")
    assert agree(comm, c.ok), c.errors


def blob_files(hs):
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(hs, "*.ddsblob")))


def test_method2_reader(comm):
    hs = handshake_dir("-reader")
    if not HAVE_METHOD2:
        return unavailable(comm, hs)
    src = RecordSource("dict")
    ds = core(comm, src, "m2/recs.v1", hs)
    c = Checks()
    if comm.rank == 0:
        # The schema is the library's blob "<name>/__schema__" (a private
        # file beside the variables' records), no file of pyddstore's own.
        meta = json.loads(ds.ddstore.wait_blob("m2/recs.v1/__schema__", 0))
        c.true(meta["total_ns"] == N and meta["structure"] == "dict" and meta["keys"] == ["rec", "t"],
               f"meta {meta}")
        c.true(meta["fields"] == ds.schema["fields"], "meta fields")
        blobs = blob_files(hs)
        c.true(len(blobs) == 1 and blobs[0].startswith("m2_recs_v1___schema__."), f"blob files {blobs}")
        c.true(all(stat.S_IMODE(os.stat(os.path.join(hs, b)).st_mode) == 0o600 for b in blobs), "blob mode 0600")
        c.true(not glob.glob(os.path.join(hs, "*.json")), "no .json file")
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
    without overwriting each other (the blob file names hash the exact name)."""
    hs = handshake_dir("-names")
    if not HAVE_METHOD2:
        return unavailable(comm, hs)
    c = Checks()
    dot = core(comm, Offset(0), "a.b", hs)
    und = core(comm, Offset(1000), "a_b", hs)
    if comm.rank == 0:
        blobs = blob_files(hs)
        c.true(len(blobs) == 2, f"schema blobs {blobs}")
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
    c.true(err is None or "DDSTORE_HANDSHAKE_TIMEOUT_S" in str(err), "the message names the setting")
    c.true(time.monotonic() - t0 < 10, "the timeout is honoured")
    assert agree(comm, c.ok), c.errors


def test_method2_old_schema_file_refused(comm):
    """A directory holding the `.meta.json` schema file an older pyddstore
    wrote: the reader and the core group both refuse it, saying what changed
    and what to do, and nothing is published."""
    hs = handshake_dir("-old")
    if comm.rank == 0:
        with open(os.path.join(hs, _safe_name("old") + ".meta.json"), "w", encoding="utf-8") as fh:
            json.dump({"total_ns": N, "structure": "tensor"}, fh)
    comm.Barrier()
    c = Checks()
    import pyddstore
    c.raises(pyddstore.MismatchError, lambda: DistDatasetReader("old", handshake_dir=hs, n_core=1),
             "reader", match="older pyddstore")
    if HAVE_METHOD2:
        err = c.raises(ValueError, lambda: core(comm, Offset(0), "old", hs), "core group", match="older pyddstore")
        c.true(err is None or "remove the directory" in str(err), f"what to do: {err}")
        c.true(not blob_files(hs), "nothing published")
    assert agree(comm, c.ok), c.errors


def test_method2_corrupt_schema_blob(comm, monkeypatch):
    """The schema travels with the library's checks: a damaged blob is
    refused at once, naming its file, not read as a wrong schema."""
    hs = handshake_dir("-corrupt")
    if not HAVE_METHOD2:
        return unavailable(comm, hs)
    import pyddstore
    ds = core(comm, Offset(0), "dmg", hs)
    c = Checks()
    if comm.rank == 0:
        (path,) = glob.glob(os.path.join(hs, "dmg___schema__.*.ddsblob"))
        with open(path, "r+b") as fh:
            fh.seek(50)
            b = fh.read(1)
            fh.seek(50)
            fh.write(bytes([b[0] ^ 1]))
        monkeypatch.setenv("DDSTORE_HANDSHAKE_TIMEOUT_S", "30")
        t0 = time.monotonic()
        err = c.raises(pyddstore.HandshakeIOError, lambda: DistDatasetReader("dmg", handshake_dir=hs, n_core=comm.size),
                       "corrupt schema", match="checksum mismatch")
        c.true(err is None or path in str(err), "the message names the file")
        c.true(time.monotonic() - t0 < 10, "refused at once")
    teardown(comm, ds)
    assert agree(comm, c.ok), c.errors
