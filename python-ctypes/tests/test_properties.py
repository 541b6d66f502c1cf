"""Property-based tests (hypothesis) of the argument boundary of every
PyDDStore call: integers at and beyond every limit (the variable's and the
C types'), numpy scalars of every width, bools, floats, None, strings, and
names with NUL, lone surrogates and 255/256 UTF-8 bytes. Each call either
returns the right data (the stored rows follow a formula) or raises a
DDStoreError subclass; every row is intact afterwards.

Collective calls (add, init, method 0's get_batch) need every rank to draw
the same example: the settings are derandomized and database-less, so each
rank generates the identical sequence; each example is all-gathered to
check that, and outcomes are all-gathered so every rank passes or fails
(and shrinks) the same way. Runs for methods 0 and 1 on every rank count.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pyddstore as dds
from mpi4py import MPI
from pyddstore._buffers import HOST_DTYPES
from helpers import METHODS, make_store

ROWS, COLS = 5, 2
PROP_METHODS = [m for m in METHODS if m in (0, 1)]

SETTINGS = dict(derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# Every example is a round of collective calls: at 4 ranks on this 2-core
# machine they cost several times more, so 4-rank runs draw 40% of the
# examples (the same derandomized sequence, so its first, boundary-heavy part).
EXAMPLES = 1.0 if MPI.COMM_WORLD.size <= 2 else 0.4


def examples(n):
    return max(10, int(n * EXAMPLES))

INT_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


def formula(g):
    """Stored row g of "p"."""
    g = np.asarray(g, np.int64)
    return np.stack([g, 7 * g + 1], axis=-1)


def as_index(v):
    """The int a valid integer argument stands for, or None (refused: bool,
    non-integer, or outside int64)."""
    if isinstance(v, (bool, np.bool_)) or not hasattr(type(v), "__index__"):
        return None
    i = int(v.__index__())
    return i if -2**63 <= i < 2**63 else None


def boundaries(total):
    base = [-1, 0, 1, total - 1, total, total + 1, ROWS - 1, ROWS, 2**31 - 1, 2**31, 2**32,
            2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**31, -2**31 - 1, -2**63, -2**63 - 1, -2**70]
    return base + [2**64 + k for k in range(0, total + 1)]


def int_like(total):
    """An integer in every Python/numpy form, or a non-integer."""
    ints = st.one_of(st.sampled_from(boundaries(total)), st.integers(-3, total + 3),
                     st.integers(-2**80, 2**80))

    def typed(i, t):
        info = np.iinfo(t)
        return t(i) if info.min <= i <= info.max else i

    return st.one_of(
        ints,
        st.tuples(ints, st.sampled_from(INT_TYPES)).map(lambda p: typed(*p)),
        st.booleans(), st.sampled_from([np.True_, np.False_]),
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([np.float32(1.0), np.float64(0.0)]),
        st.none(), st.sampled_from(["0", "1", b"1", [0], 1j]),
    )


def outcome(fn):
    """(None, result) or (exception, None); an exception that is not a
    DDStoreError is a failure of the property, so it is re-raised."""
    try:
        return None, fn()
    except dds.DDStoreError as exc:
        return exc, None


def all_agree(comm, example):
    every = comm.allgather(repr(example))
    assert all(e == every[0] for e in every), f"ranks drew different examples: {every}"


def all_pass(comm, problem):
    """Every rank raises AssertionError if any rank saw `problem` (a str or None)."""
    every = comm.allgather(problem)
    bad = [f"rank {r}: {p}" for r, p in enumerate(every) if p]
    assert not bad, "; ".join(bad)


def whole_variable_intact(s, comm, total):
    out = np.empty((total, COLS), np.int64)
    s.get_batch("p", out, np.arange(total))  # collective for method 0: every rank calls it
    good = np.array_equal(out, formula(np.arange(total)))
    all_pass(comm, None if good else f"rows changed: {out.tolist()}")


@pytest.fixture(params=PROP_METHODS)
def pstore(request, comm):
    s = make_store(comm, request.param)
    s.add("p", formula(np.arange(comm.rank * ROWS, (comm.rank + 1) * ROWS)))
    yield s
    comm.Barrier()
    whole_variable_intact(s, comm, ROWS * comm.size)
    comm.Barrier()
    s.free()


def test_get_start(pstore, comm):
    total = ROWS * comm.size

    @settings(max_examples=examples(150), **SETTINGS)
    @given(start=int_like(total), rows=st.integers(0, 3))
    def prop(start, rows):
        out = np.full((rows, COLS), -5, np.int64)
        err, _ = outcome(lambda: pstore.get("p", out, start))
        i = as_index(start)
        # get reads inside one shard (rows of several ranks: get_batch).
        if i is not None and 0 <= i and i + rows <= total and rows > 0 and i // ROWS == (i + rows - 1) // ROWS:
            assert err is None, f"get(start={start!r}, rows={rows}) raised {err!r}"
            assert np.array_equal(out, formula(np.arange(i, i + rows))), f"start={start!r}: {out}"
        elif rows == 0 and i is not None and 0 <= i <= total:
            # A zero-row read moves nothing; its start may be the end.
            assert err is None, f"get(start={start!r}, rows=0) raised {err!r}"
        elif i is None or i < 0 or i + rows > total:
            assert err is not None, f"get(start={start!r}, rows={rows}) did not raise"
            assert (out == -5).all(), f"a refused get wrote the buffer (start={start!r})"
            if i is None:
                assert isinstance(err, (dds.ArgumentTypeError, dds.IndexOutOfRangeError)), repr(err)
                assert "start" in str(err), str(err)

    prop()


def test_update_offset(pstore, comm):
    """Valid offsets write the rows' own values back; refused ones would write
    a marker, which the read-back of the whole variable would find."""
    first = comm.rank * ROWS

    @settings(max_examples=examples(150), **SETTINGS)
    @given(offset=int_like(ROWS), rows=st.integers(0, 3))
    def prop(offset, rows):
        i = as_index(offset)
        valid = i is not None and 0 <= i and i + rows <= ROWS
        data = formula(np.arange(first + i, first + i + rows)) if valid else np.full((rows, COLS), -99, np.int64)
        err, _ = outcome(lambda: pstore.update("p", data, offset))
        if valid and rows > 0:
            assert err is None, f"update(offset={offset!r}, rows={rows}) raised {err!r}"
        elif not valid:
            assert err is not None, f"update(offset={offset!r}, rows={rows}) did not raise"
        mine = np.empty((ROWS, COLS), np.int64)
        pstore.get("p", mine, first)
        assert np.array_equal(mine, formula(np.arange(first, first + ROWS))), \
            f"update(offset={offset!r}) changed rows: {mine.tolist()}"

    prop()


def index_lists(total):
    one = int_like(total)
    small = st.integers(-2, total + 2)
    return st.one_of(
        st.lists(one, max_size=4),
        st.lists(small, max_size=4),
        st.tuples(st.lists(small, max_size=4), st.sampled_from(INT_TYPES + (np.float64, np.bool_)))
          .map(lambda p: np.array(p[0]).astype(p[1]) if p[0] else np.zeros(0, p[1])),
        st.sampled_from([np.array([2**63, 0], np.uint64), np.array([0, 2**64 - 1], np.uint64),
                         np.zeros((2, 1), np.int64), None, 3, "01"]),
    )


def expected_indices(indices):
    """The int64 rows `indices` stands for, or None when it must be refused."""
    if isinstance(indices, np.ndarray):
        if indices.ndim != 1 or (indices.size and indices.dtype.kind not in "iu"):
            return None
        return [as_index(v) for v in indices.tolist()] if indices.size else []
    if not isinstance(indices, (list, tuple)):
        return None
    return [as_index(v) for v in indices]


def test_get_batch_indices(pstore, comm):
    """Collective for method 0: every rank draws the same example."""
    total = ROWS * comm.size
    collective = pstore.method == 0

    @settings(max_examples=examples(120), **SETTINGS)
    @given(indices=index_lists(total))
    def prop(indices):
        if collective:
            all_agree(comm, indices)
        want = expected_indices(indices)
        if isinstance(indices, np.ndarray):
            n = indices.shape[0] if indices.ndim else 1
        else:
            n = len(indices) if isinstance(indices, (list, tuple)) else 1
        out = np.full((n, COLS), -5, np.int64)
        problem = None
        try:
            err, _ = outcome(lambda: pstore.get_batch("p", out, indices))
            valid = want is not None and all(w is not None and 0 <= w < total for w in want)
            if valid:
                if err is not None:
                    problem = f"get_batch({indices!r}) raised {err!r}"
                elif not np.array_equal(out, formula(np.array(want, np.int64)).reshape(n, COLS)):
                    problem = f"get_batch({indices!r}) read {out.tolist()}"
            elif err is None:
                problem = f"get_batch({indices!r}) did not raise"
            elif not (out == -5).all():
                problem = f"a refused get_batch({indices!r}) wrote the destination"
        except Exception as exc:  # not a DDStoreError: the property fails, on every rank
            problem = f"get_batch({indices!r}) raised {type(exc).__name__}: {exc}"
        if collective:
            all_pass(comm, problem)
        else:
            assert problem is None, problem

    prop()


NAMES = st.one_of(
    st.sampled_from(["p", "a\x00b", "p\x00", "\udc80", "x\udcff", "é" * 127 + "a", "é" * 128,
                     "", "a" * 255, "a" * 256]),
    st.text(max_size=6), st.none(), st.integers(-1, 1), st.binary(max_size=3), st.just(["p"]),
)


def name_rule(name):
    """'ok' for a name the library accepts; else the error class it must raise."""
    if not isinstance(name, str):
        return dds.ArgumentTypeError
    try:
        b = name.encode("utf-8")
    except UnicodeEncodeError:
        return dds.InvalidArgumentError
    if b"\0" in b or not b or len(b) > 255:
        return dds.InvalidArgumentError
    return "ok"


def test_names_of_every_local_call(pstore, comm):
    total = ROWS * comm.size

    @settings(max_examples=examples(100), **SETTINGS)
    @given(name=NAMES)
    def prop(name):
        rule = name_rule(name)
        out = np.empty((1, COLS), np.int64)
        calls = {
            "get": lambda: pstore.get(name, out, total - 1),
            "info": lambda: pstore.info(name),
            "get_profile": lambda: pstore.get_profile(name),
            "update": lambda: pstore.update(name, formula([comm.rank * ROWS]), 0),
            "register_recv": lambda: pstore.register_recv(name, out),
            "unregister_recv": lambda: pstore.unregister_recv(name, out),
        }
        for what, call in calls.items():
            err, res = outcome(call)
            if name == "p":
                assert err is None, f"{what}('p') raised {err!r}"
            elif rule == "ok":
                assert isinstance(err, dds.UnknownVariableError), f"{what}({name!r}) gave {err!r}"
            else:
                assert isinstance(err, rule), f"{what}({name!r}) gave {err!r}, not {rule.__name__}"
        if name == "p":
            assert np.array_equal(out[0], formula(total - 1))

    prop()


DTYPES = st.sampled_from([np.int32, np.int64, np.uint8, np.float32, np.float64, np.bool_,
                          np.float16, np.int8, np.uint64, np.complex64])


@pytest.mark.parametrize("method", PROP_METHODS)
def test_add_and_init_are_collective_and_checked(comm, method):
    s = make_store(comm, method)
    registered = {}

    small_or_huge = st.one_of(st.integers(-2, 4), st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64 + 2, -2**63 - 1]),
                              st.sampled_from([True, 1.0, None, "2", np.uint64(3), np.int8(2)]))

    names = st.one_of(st.text("abcdefgh", min_size=1, max_size=6), NAMES)
    sizes = st.one_of(small_or_huge, st.sampled_from([1, 2, 4, 8, 3, 0, -1, 2**31, 2**31 - 1, 2**32 + 8]))
    counter = [0]

    @settings(max_examples=examples(120), **SETTINGS)
    @given(kind=st.sampled_from(["add", "init"]), which=st.sampled_from(["name", "rows", "disp", "itemsize", "dtype"]),
           name=names, dtype=DTYPES, size=sizes)
    def prop(kind, which, name, dtype, size):
        # One argument at a time departs from a valid call, so a wrapped or
        # truncated value is not hidden behind another argument's refusal.
        counter[0] += 1
        fresh = f"v{counter[0]}"
        rows, disp, itemsize = 2, 2, 4
        if which == "rows":
            rows = size
        elif which == "disp":
            disp = size
        elif which == "itemsize":
            itemsize = size
        if which != "name":
            name = fresh
        if which != "dtype":
            dtype = np.float32
        all_agree(comm, (kind, which, name, dtype, rows, disp, itemsize))
        rule = name_rule(name)
        problem = None
        r, d, i = as_index(rows), as_index(disp), as_index(itemsize)
        if kind == "add":
            nr = r if r is not None and 0 <= r <= 3 else 2
            arr = np.ones((nr, 2), dtype)
            err, _ = outcome(lambda: s.add(name, arr))
            must_fail = rule != "ok" or np.dtype(dtype) not in HOST_DTYPES or name in registered
            shape = (nr * comm.size, 2, np.dtype(dtype).itemsize)
        else:
            if r is not None and d is not None and i is not None and 0 < r * d * i and \
                    (1 << 20) < r * d * i < (1 << 64):
                assume(False)  # a real allocation of that size: not what is being tested
            err, _ = outcome(lambda: s.init(name, rows, disp, itemsize))
            must_fail = rule != "ok" or name in registered or None in (r, d, i) or r < 0 or d < 0 or \
                not 0 < i < 2**31
            shape = None if must_fail else (r * comm.size, d, i)
        if must_fail and err is None:
            problem = f"{kind}({name!r}, rows={rows!r}, disp={disp!r}, itemsize={itemsize!r}, {dtype}) did not raise"
        if err is None and not must_fail:
            registered[name] = True
            got = s.info(name)
            if got != shape:
                problem = f"{kind}({name!r}): info {got}, expected {shape}"
        # A failure is the same on every rank (a collective failed everywhere).
        every = comm.allgather(None if err is None else type(err).__name__)
        if any(e is None for e in every) and any(e is not None for e in every):
            problem = problem or f"{kind}({name!r}) succeeded on some ranks only: {every}"
        all_pass(comm, problem)

    try:
        prop()
    finally:
        comm.Barrier()
        s.free()


# dds_save / dds_load: the name list and the directory cross into C.
SNAP_NAMES = st.lists(st.one_of(st.sampled_from(["p", "q", "nope", "", "p\0q", "p/../q", "ü"]),
                                st.text(max_size=6)), max_size=4)


def test_snapshot_names_and_dir(comm, tmp_path_factory):
    base = comm.bcast(str(tmp_path_factory.mktemp("snapprop")) if comm.rank == 0 else None, root=0)
    s = make_store(comm, 0)
    s.add("p", formula(np.arange(comm.rank * ROWS, (comm.rank + 1) * ROWS)))
    s.add("q", formula(np.arange(comm.rank * ROWS, (comm.rank + 1) * ROWS)) + 1000)
    counter = [0]

    @settings(max_examples=examples(60), **SETTINGS)
    @given(names=SNAP_NAMES, bad_dir=st.sampled_from([None, "", "a\0b"]))
    def prop(names, bad_dir):
        all_agree(comm, (names, bad_dir))
        counter[0] += 1
        d = os.path.join(base, f"s{counter[0]}") if bad_dir is None else bad_dir
        err, _ = outcome(lambda: s.save(d, names))
        valid = (bad_dir is None and all(n in ("p", "q") for n in names) and len(set(names)) == len(names))
        errs = comm.allgather(None if err is None else (type(err).__name__, str(err)))
        problem = None
        if any(e != errs[0] for e in errs):
            problem = f"ranks disagree: {errs}"
        elif valid and err is not None:
            problem = f"save({d!r}, {names!r}) raised {err!r}"
        elif not valid and err is None:
            problem = f"save({d!r}, {names!r}) was accepted"
        elif valid:
            # Load it into a fresh store: the rows saved come back.
            t = make_store(comm, 0)
            try:
                lerr, _ = outcome(lambda: t.load(d))
                if lerr is not None:
                    problem = f"load of {d!r} raised {lerr!r}"
                else:
                    for n in (names or ["p", "q"]):
                        out = np.empty((ROWS * comm.size, COLS), np.int64)
                        t.get_batch(n, out, np.arange(ROWS * comm.size))
                        want = formula(np.arange(ROWS * comm.size)) + (1000 if n == "q" else 0)
                        if not np.array_equal(out, want):
                            problem = f"{n} after save({names!r})/load: {out.tolist()}"
            finally:
                t.free()
        all_pass(comm, problem)

    try:
        prop()
    finally:
        comm.Barrier()
        s.free()
