"""Issue 23, Python half: no argument crosses into C wrapped, truncated or
unchecked. Every bad value gets a DDStoreError subclass (which is also the
builtin DDStore 3.0 raised) whose message names the argument, and the store
keeps every row (read back after each group)."""

import numpy as np
import pytest

import pyddstore as dds
from helpers import METHODS, RankChecks, make_store

ROWS, COLS = 6, 2


def value(g):
    """Row g of "x" as stored: [g, -g] (float64)."""
    return np.array([g, -g], np.float64)


@pytest.fixture(params=METHODS)
def store(request, comm):
    s = make_store(comm, request.param)
    first = comm.rank * ROWS
    s.add("x", np.stack([value(first + i) for i in range(ROWS)]))
    yield s
    comm.Barrier()
    intact(s, comm)
    comm.Barrier()
    s.free()


def intact(s, comm):
    """Every row of "x" still holds its value (read back one at a time)."""
    out = np.empty((1, COLS), np.float64)
    bad = []
    for g in range(ROWS * comm.size):
        s.get("x", out, g)
        if not np.array_equal(out[0], value(g)):
            bad.append((g, out[0].tolist()))
    every = comm.allgather(bad)
    assert not any(every), f"rows changed after bad inputs: {every}"


def refused(cls, fn, *needles):
    """fn() raises `cls` (a DDStoreError) whose message holds every needle."""
    with pytest.raises(cls) as info:
        fn()
    assert isinstance(info.value, dds.DDStoreError)
    for n in needles:
        assert n in str(info.value), f"{str(info.value)!r} lacks {n!r}"
    return info.value


# -- 1. integers outside the C types --------------------------------------------------

def test_get_start_beyond_int64_is_refused_not_wrapped(store, comm):
    out = np.full((1, COLS), 7.0)
    # Before: ctypes wrapped 2**64 + 5 to 5 and this read global row 5.
    refused(dds.IndexOutOfRangeError, lambda: store.get("x", out, 2**64 + 5), "start=18446744073709551621")
    refused(dds.IndexOutOfRangeError, lambda: store.get("x", out, -2**64 - 1), "start=")
    refused(dds.IndexOutOfRangeError, lambda: store.get("x", out, np.uint64(2**64 - 1)), "start=18446744073709551615")
    assert np.array_equal(out, np.full((1, COLS), 7.0)), "the buffer was written by a refused read"
    # int64's own limits reach the library, which refuses them as out of range.
    refused(dds.IndexOutOfRangeError, lambda: store.get("x", out, 2**63 - 1), str(2**63 - 1))
    refused(dds.IndexOutOfRangeError, lambda: store.get("x", out, -2**63), str(-2**63))


@pytest.mark.parametrize("t", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_numpy_scalars_of_every_width_read_their_row(store, comm, t):
    out = np.empty((1, COLS), np.float64)
    g = ROWS * comm.size - 1
    store.get("x", out, t(g))
    assert np.array_equal(out[0], value(g))
    store.update("x", value(comm.rank * ROWS + 2)[None], t(2))  # same value back: rows stay intact


def test_bools_floats_none_strings_are_refused_as_integers(store):
    out = np.empty((1, COLS), np.float64)
    for bad, shown in ((True, "bool"), (np.True_, "bool"), (1.5, "float"), (np.float64(2.0), "float64"),
                       (None, "NoneType"), ("1", "str")):
        e = refused(dds.ArgumentTypeError, lambda: store.get("x", out, bad), "start", shown)
        assert isinstance(e, TypeError)
        refused(dds.ArgumentTypeError, lambda: store.update("x", out, bad), "offset", shown)


def test_update_offset_beyond_int64_is_refused_not_wrapped(store, comm):
    bad = np.full((1, COLS), 99.0)
    # Before: 2**64 + 3 wrapped to 3 and overwrote local row 3.
    refused(dds.IndexOutOfRangeError, lambda: store.update("x", bad, 2**64 + 3), "offset=18446744073709551619")
    refused(dds.IndexOutOfRangeError, lambda: store.update("x", bad, np.uint64(2**63)), "offset=9223372036854775808")


@pytest.mark.parametrize("method", METHODS)
def test_init_sizes_beyond_their_c_types_are_refused_on_every_rank(comm, method):
    s = make_store(comm, method)
    # Before: nrows 2**64 + 2 wrapped to 2 and made a variable of 2 rows per rank.
    refused(dds.InvalidArgumentError, lambda: s.init("v", 2**64 + 2, 1, 8), "nrows=18446744073709551618")
    refused(dds.InvalidArgumentError, lambda: s.init("v", 2, 2**64 + 1, 8), "disp=")
    refused(dds.InvalidArgumentError, lambda: s.init("v", 2, 1, 2**32 + 8), "itemsize=4294967304")
    refused(dds.ArgumentTypeError, lambda: s.init("v", True, 1, 8), "nrows", "bool")
    refused(dds.ArgumentTypeError, lambda: s.init("v", 2, 1.0, 8), "disp", "float")
    refused(dds.UnknownVariableError, lambda: s.info("v"), "'v'")  # nothing was registered
    s.init("v", 2, 1, 8)  # the name is still free and the store usable
    assert s.info("v") == (2 * comm.size, 1, 8)
    comm.Barrier()
    s.free()


def test_constructor_integers_are_checked_against_int32(comm):
    refused(dds.InvalidArgumentError, lambda: dds.PyDDStore(comm, method=2**32), "method=4294967296")
    refused(dds.ArgumentTypeError, lambda: dds.PyDDStore(comm, method=False), "method", "bool")
    refused(dds.ArgumentTypeError, lambda: dds.PyDDStore(comm, method=None), "method", "NoneType")
    refused(dds.InvalidArgumentError, lambda: dds.PyDDStore(comm, ddstore_width=2**32 + 1), "ddstore_width=")
    refused(dds.InvalidArgumentError, lambda: dds.PyDDStore(comm, n_core=-2**31 - 1), "n_core=")
    refused(dds.InvalidArgumentError, lambda: dds.PyDDStore(comm, handshake_dir="/tmp/a\x00b"), "NUL")
    refused(dds.InvalidArgumentError, lambda: dds.PyDDStore(comm, nic_map="\udc80"), "nic_map")


# -- 1. index arrays ------------------------------------------------------------

BAD_INDICES = [
    ([0.0, 1.0], dds.ArgumentTypeError, "float64"),
    (np.array([1.5, 0.0]), dds.ArgumentTypeError, "float64"),
    ([float("nan"), 0], dds.ArgumentTypeError, "float64"),
    (np.array([2**63, 0], np.uint64), dds.IndexOutOfRangeError, "indices[0]=9223372036854775808"),
    (np.array([0, 2**64 - 1], np.uint64), dds.IndexOutOfRangeError, "indices[1]=18446744073709551615"),
    ([2**70, 0], dds.IndexOutOfRangeError, "indices[0]=1180591620717411303424"),
    ([0, -2**64], dds.IndexOutOfRangeError, "indices[1]="),
    ([0, None], dds.ArgumentTypeError, "indices[1]"),
    (["a", 0], dds.ArgumentTypeError, "indices must be integers"),
    ([True, 0], dds.ArgumentTypeError, "bool"),
    (np.array([True, False]), dds.ArgumentTypeError, "bool"),
    (np.zeros((2, 1), np.int64), dds.InvalidArgumentError, "one-dimensional"),
    (3, dds.ArgumentTypeError, "indices"),
    (None, dds.ArgumentTypeError, "indices"),
]


def test_bad_indices_are_refused_on_every_rank(store, comm):
    """Every rank passes the same bad list, so method 0's collective fails on all."""
    out = np.full((2, COLS), 5.0)
    for bad, cls, needle in BAD_INDICES:
        refused(cls, lambda: store.get_batch("x", out, bad), needle)
    assert (out == 5.0).all(), "a refused batch wrote the buffer"
    # Integer dtypes of every width are accepted and read the right rows.
    last = ROWS * comm.size - 1
    for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64):
        store.get_batch("x", out, np.array([last, 0], t))
        assert np.array_equal(out, np.stack([value(last), value(0)])), t
    store.get_batch("x", out, [np.int64(1), np.uint8(last)])
    assert np.array_equal(out, np.stack([value(1), value(last)]))
    store.get_batch("x", np.empty((0, COLS)), [])


def test_int64_index_array_is_passed_without_a_copy(store, comm):
    """The hot path: a C-contiguous int64 array goes to C as it is."""
    import pyddstore._args as args
    idx = np.array([0, 1], np.int64)
    assert args.indices(idx) is idx
    strided = np.arange(4, dtype=np.int64)[::2]
    assert np.array_equal(args.indices(strided), [0, 2]) and args.indices(strided).flags.c_contiguous
    out = np.empty((2, COLS))
    store.get_batch("x", out, strided)
    assert np.array_equal(out, np.stack([value(0), value(2)]))


# -- 2. names ------------------------------------------------------------

def test_names_with_nul_are_refused(store, comm):
    # Before: c_char_p cut "x\0zzz" at the NUL and this read "x".
    out = np.empty((1, COLS))
    refused(dds.InvalidArgumentError, lambda: store.get("x\x00zzz", out, 0), "NUL", "position 1")
    refused(dds.InvalidArgumentError, lambda: store.info("x\x00"), "NUL")
    refused(dds.InvalidArgumentError, lambda: store.get_batch("x\x00b", out, [0]), "NUL")
    refused(dds.InvalidArgumentError, lambda: store.update("x\x00", out, 0), "NUL")
    # Before: "a\0b" registered as "a".
    refused(dds.InvalidArgumentError, lambda: store.add("a\x00b", np.zeros((1, 1))), "NUL", "'a\\x00b'")
    refused(dds.UnknownVariableError, lambda: store.info("a"), "'a'")


def test_lone_surrogate_names_are_invalid_arguments(store):
    out = np.empty((1, COLS))
    for call in (lambda: store.get("\udc80", out, 0), lambda: store.info("x\udc80"),
                 lambda: store.add("\udc80", np.zeros((1, 1)))):
        e = refused(dds.InvalidArgumentError, call, "UTF-8")
        assert isinstance(e, ValueError) and not isinstance(e, UnicodeError)


def test_name_of_255_utf8_bytes_is_accepted_256_refused(store, comm):
    ok = "é" * 127 + "a"  # 255 bytes
    long = "é" * 128  # 256 bytes, 128 characters
    assert len(ok.encode()) == 255 and len(long.encode()) == 256
    store.add(ok, np.full((1, 1), comm.rank, np.int32))
    out = np.empty((1, 1), np.int32)
    store.get(ok, out, comm.size - 1)
    assert out[0, 0] == comm.size - 1
    refused(dds.InvalidArgumentError, lambda: store.add(long, np.zeros((1, 1), np.int32)), "longer than 255 bytes")
    refused(dds.InvalidArgumentError, lambda: store.info(long), "longer than 255 bytes")


def test_names_of_the_wrong_type_are_type_errors(store):
    out = np.empty((1, COLS))
    for bad in (b"x", ["x"], None, 3):
        for call in (lambda: store.get(bad, out, 0), lambda: store.info(bad),
                     lambda: store.get_batch(bad, out, [0])):
            e = refused(dds.ArgumentTypeError, call, "name must be a str")
            assert isinstance(e, TypeError)


# -- 6. unregister_recv of an unknown variable ------------------------------------------

def test_unregister_recv_unknown_variable_on_every_method(store):
    # Before: method 1 raised InvalidArgumentError, method 0 returned silently.
    buf = np.empty((2, COLS))
    refused(dds.UnknownVariableError, lambda: store.unregister_recv("nope", buf), "'nope'")
    # A known name with an unregistered buffer: as before (ignored for method 0).
    if store.method == 0:
        store.unregister_recv("x", buf)
    else:
        refused(dds.InvalidArgumentError, lambda: store.unregister_recv("x", buf), "not registered for 'x'")


# -- 4. a collective fails on every rank with the real cause -------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_add_float16_on_rank_0_names_the_cause_on_every_rank(comm, method):
    if comm.size < 2:
        pytest.skip("needs a second rank to see rank 0's failure")
    s = make_store(comm, method)
    arr = np.zeros((2, 3), np.float16 if comm.rank == 0 else np.float32)
    ck = RankChecks(comm)
    try:
        s.add("y", arr)
        ck(False, "add did not raise")
    except dds.DDStoreError as exc:
        # Every rank raises the same class with the same message (issue 35).
        ck(isinstance(exc, dds.UnsupportedDtypeError), f"rank {comm.rank} raised {exc!r}")
        ck("float16" in str(exc) and "rank 0" in str(exc), f"message {str(exc)!r} lacks the cause or rank 0")
        ck("negative" not in str(exc), f"message {str(exc)!r} is an artefact")
        seen = comm.allgather((type(exc).__name__, str(exc)))
        ck(all(x == seen[0] for x in seen), f"ranks raised different errors: {seen}")
    s.add("y", np.full((2, 3), comm.rank, np.float32))  # the name is still free
    out = np.empty((1, 3), np.float32)
    s.get("y", out, 2 * comm.size - 1)
    ck((out == comm.size - 1).all(), f"read back {out}")
    comm.Barrier()
    s.free()
    ck.done()


def test_batch_bad_indices_on_one_rank_names_the_cause_on_every_rank(comm):
    if comm.size < 2 or 0 not in METHODS:
        pytest.skip("needs a second rank (method 0's collective batch)")
    s = make_store(comm, 0)
    s.add("x", np.stack([value(comm.rank * ROWS + i) for i in range(ROWS)]))
    out = np.empty((2, COLS))
    ck = RankChecks(comm)
    try:
        s.get_batch("x", out, [0.5, 1.0] if comm.rank == 0 else [0, 1])
        ck(False, "get_batch did not raise")
    except dds.DDStoreError as exc:
        if comm.rank == 0:
            ck(isinstance(exc, dds.ArgumentTypeError) and "float64" in str(exc), f"rank 0 raised {exc!r}")
        else:
            ck("float64" in str(exc) and "rank 0" in str(exc), f"message {str(exc)!r} lacks the cause or rank 0")
    s.get_batch("x", out, [ROWS * comm.size - 1, 0])
    ck(np.array_equal(out, np.stack([value(ROWS * comm.size - 1), value(0)])), f"read back {out}")
    comm.Barrier()
    intact(s, comm)
    comm.Barrier()
    s.free()
    ck.done()


# -- environment variables the Python layer reads itself ---------------------

@pytest.mark.parametrize("raw, want", [
    ("", True), ("1", True), ("on", True), (" TRUE ", True), ("yes", True),
    ("0", False), ("off", False), ("False", False), ("no", False),
])
def test_env_switch_words(raw, want):
    from pyddstore import _args
    assert _args.env_switch("DDSTORE_X", True, {"DDSTORE_X": raw}) is want
    assert _args.env_switch("DDSTORE_X", False, {}) is False


@pytest.mark.parametrize("raw", ["2", "maybe", "of", "-1", "1.0"])
def test_env_switch_refuses_other_words(raw):
    from pyddstore import _args
    refused(dds.InvalidArgumentError, lambda: _args.env_switch("DDSTORE_X", True, {"DDSTORE_X": raw}),
            "DDSTORE_X", repr(raw))


@pytest.mark.parametrize("raw, ok", [
    ("0", True), ("2", True), ("3", False), ("-1", False), ("1.5", False), ("two", False), (str(2**64 + 1), False),
])
def test_env_int_range(raw, ok):
    from pyddstore import _args
    call = lambda: _args.env_int("DDSTORE_METHOD", 0, 0, 2, {"DDSTORE_METHOD": raw})  # noqa: E731
    if ok:
        assert call() == int(raw)
    else:
        refused(dds.InvalidArgumentError, call, "DDSTORE_METHOD")


@pytest.mark.parametrize("method", METHODS)
def test_profile_off_means_off(comm, method, monkeypatch):
    """DDSTORE_PROFILE=off used to turn Python-side timing on (any value but
    "0" did); the library and the package now read the same words."""
    monkeypatch.setenv("DDSTORE_PROFILE", "off")
    s = make_store(comm, method)
    try:
        s.add("p", np.zeros((2, 1), np.float64))
        out = np.empty((1, 1), np.float64)
        s.get("p", out, 0)
        prof = s.get_profile("p")
        assert prof["py_gets"] == 0 and prof["py_get"] == 0.0
    finally:
        s.free()
    monkeypatch.setenv("DDSTORE_PROFILE", "on")
    s = make_store(comm, method)
    try:
        s.add("p", np.zeros((2, 1), np.float64))
        s.get("p", out, 0)
        assert s.get_profile("p")["py_gets"] == 1
    finally:
        s.free()
