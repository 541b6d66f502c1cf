"""PyDDStore.publish_blob / wait_blob: opaque bytes under a name in the
method-2 hand-shake directory (dds_publish_blob, dds_wait_blob).

Every rank makes its own extra member on one directory (extras open no
fabric, so these run wherever method 2 is built); rank 0 publishes and
every rank waits, as a separate job would.
"""

import glob
import os
import time

import numpy as np
from hypothesis import given, settings, strategies as st

import pyddstore as dds
from helpers import METHODS, RankChecks, handshake_dir, make_store


def extra(hs, **kw):
    return dds.PyDDStore(None, method=2, handshake_dir=hs, n_core=1, **kw)


def refused(ck, exc, fn, what, *parts):
    try:
        fn()
    except exc as e:
        return ck(all(p in str(e) for p in parts), f"{what}: {e!r} lacks {parts}")
    except Exception as e:  # noqa: BLE001
        return ck(False, f"{what}: raised {type(e).__name__}: {e}, not {exc.__name__}")
    return ck(False, f"{what}: did not raise")


def max_bytes():
    from pyddstore import _lib
    return _lib.DDS_BLOB_MAX_BYTES


def test_sizes_at_the_bounds_and_replacement(comm):
    hs = handshake_dir("-blob")
    top = max_bytes()
    s = extra(hs)
    ck = RankChecks(comm)
    payloads = {"b/0": b"", "b/1": b"\x07", "b/max": np.arange(top, dtype=np.uint8).tobytes()}
    if comm.rank == 0:
        for name, data in payloads.items():
            s.publish_blob(name, data)
        # Any contiguous buffer: a numpy array's bytes.
        s.publish_blob("b/array", np.arange(10, dtype=np.float64))
        s.publish_blob("b/replaced", b"one")
        s.publish_blob("b/replaced", b"two!")
    comm.Barrier()
    for name, data in payloads.items():
        ck(s.wait_blob(name, 30000) == data, f"{name}: bytes")
    ck(np.array_equal(np.frombuffer(s.wait_blob("b/array"), np.float64), np.arange(10.0)), "array")
    ck(s.wait_blob("b/replaced", 0) == b"two!", "the newer blob")
    refused(ck, dds.InvalidArgumentError, lambda: s.publish_blob("b/over", bytes(top + 1)), "max + 1",
            f"{top + 1} bytes", f"DDS_BLOB_MAX_BYTES ({top})", "'b/over'")
    s.free()
    ck.done()


def test_two_names_at_once(comm):
    """Each rank publishes its own name and waits for its neighbour's."""
    hs = handshake_dir("-pair")
    s = extra(hs)
    ck = RankChecks(comm)
    s.publish_blob(f"pair/{comm.rank}", bytes([comm.rank]) * (100 + comm.rank))
    other = (comm.rank + 1) % comm.size
    ck(s.wait_blob(f"pair/{other}", 30000) == bytes([other]) * (100 + other), "neighbour's blob")
    s.free()
    ck.done()


def test_errors_name_what_is_wrong(comm, monkeypatch):
    hs = handshake_dir("-errors")
    s = extra(hs)
    ck = RankChecks(comm)
    refused(ck, dds.InvalidArgumentError, lambda: s.publish_blob("", b"x"), "empty name", "blob name is empty")
    refused(ck, dds.InvalidArgumentError, lambda: s.publish_blob("n" * 256, b"x"), "long name", "longer than 255")
    refused(ck, dds.ArgumentTypeError, lambda: s.publish_blob(3, b"x"), "name type", "str")
    refused(ck, dds.ArgumentTypeError, lambda: s.publish_blob("x", 3.5), "data type", "buffer")
    t0 = time.monotonic()
    refused(ck, dds.DDStoreTimeoutError, lambda: s.wait_blob("never", 200), "time-out",
            "'never'", hs, "0.2 s")
    ck(time.monotonic() - t0 >= 0.2, "waited the time-out")
    monkeypatch.setenv("DDSTORE_HANDSHAKE_TIMEOUT_S", "0.3")
    quick = extra(hs)
    refused(ck, TimeoutError, lambda: quick.wait_blob("never"), "DDSTORE_HANDSHAKE_TIMEOUT_S",
            "within 0.3 s", "DDSTORE_HANDSHAKE_TIMEOUT_S")
    quick.free()
    # A damaged blob (each rank its own): refused at once, naming the file.
    name = f"dmg/{comm.rank}"
    s.publish_blob(name, b"schema" * 10)
    (path,) = glob.glob(os.path.join(hs, f"dmg_{comm.rank}.*.ddsblob"))
    with open(path, "r+b") as fh:
        fh.seek(-12, os.SEEK_END)
        fh.write(b"?")
    refused(ck, dds.HandshakeIOError, lambda: s.wait_blob(name, 20000), "corrupt", "checksum mismatch", path)
    s.publish_blob(name, b"schema")
    os.chmod(path, 0o666)
    refused(ck, dds.HandshakeIOError, lambda: s.wait_blob(name, 20000), "writable", "group or others", path)
    if os.geteuid() == 0:
        s.publish_blob(name, b"schema")
        os.chown(path, 65534, 65534)
        refused(ck, dds.HandshakeIOError, lambda: s.wait_blob(name, 20000), "foreign owner", "owned by uid 65534")
    # Still usable.
    s.publish_blob(name, b"ok")
    ck(s.wait_blob(name, 0) == b"ok", "usable after the errors")
    s.free()
    refused(ck, dds.BadStateError, lambda: s.wait_blob(name, 0), "freed store", "freed")
    ck.done()


def test_only_method2_stores_hold_blobs(comm):
    ck = RankChecks(comm)
    for m in [m for m in METHODS if m != 2]:
        s = make_store(comm, m)
        refused(ck, dds.BadStateError, lambda: s.publish_blob("x", b"x"), f"method {m}",
                f"uses method {m}")
        s.free()
    ck.done()


def test_core_member_publishes(comm):
    """A core store publishes (any rank, locally) as an extra does."""
    if 2 not in METHODS:
        return
    hs = handshake_dir("-core")
    core = make_store(comm, 2, handshake_dir=hs)
    ck = RankChecks(comm)
    core.publish_blob(f"from/{comm.rank}", str(comm.rank).encode())
    reader = extra(hs)
    for r in range(comm.size):
        ck(reader.wait_blob(f"from/{r}", 30000) == str(r).encode(), f"blob of core rank {r}")
    reader.free()
    comm.Barrier()
    core.free()
    ck.done()


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=5000), name=st.text(min_size=1, max_size=40).filter(lambda t: "\0" not in t))
def test_round_trip(tmp_path_factory, data, name):
    """Any bytes under any name come back as they went in (this rank alone)."""
    if len(name.encode("utf-8", "surrogatepass")) > 255:
        return
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return
    s = extra(str(tmp_path_factory.mktemp("hs")))
    try:
        s.publish_blob(name, data)
        assert s.wait_blob(name, 0) == data
    finally:
        s.free()
