"""Non-blocking batches (issue 20): PyDDStore.get_batch_async, req.wait(),
req.done(), for method 0 in both batch modes and methods 1 and 2 (core).

Many requests in flight waited for out of order, the request keeping arr
and the indices alive, errors at start (raised by get_batch_async, store
usable after), reads from 4 threads, a store freed with requests in flight,
and the generated index boundary of test_properties through the async path.
"""

import gc
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings

import pyddstore as dds
from helpers import METHODS, make_store
from test_properties import SETTINGS, all_agree, all_pass, expected_indices, formula, index_lists, outcome

ROWS, COLS = 5, 2
KINDS = [(m, mode) for m in METHODS for mode in (["collective", "onesided"] if m == 0 else [None])]


def _store(comm, kind):
    method, mode = kind
    kw = {"batch_mode": mode} if mode else {}
    s = make_store(comm, method, **kw)
    s.add("p", formula(np.arange(comm.rank * ROWS, (comm.rank + 1) * ROWS)))
    comm.Barrier()
    return s


@pytest.fixture(params=KINDS, ids=lambda k: f"m{k[0]}-{k[1] or 'onesided'}")
def kstore(request, comm):
    s = _store(comm, request.param)
    s.collective = request.param == (0, "collective")
    yield s
    comm.Barrier()
    s.free()


def test_many_in_flight_out_of_order(kstore, comm):
    total = ROWS * comm.size
    rng = np.random.default_rng(11 + comm.rank)
    idx = [rng.integers(0, total, size=40) for _ in range(16)]
    outs = [np.full((40, COLS), -1, np.int64) for _ in idx]
    reqs = [kstore.get_batch_async("p", o, i) for o, i in zip(outs, idx)]
    for k in [5, 0, 15, 3, 9, 1, 14, 2, 8, 4, 13, 6, 12, 7, 11, 10]:
        reqs[k].wait()
        assert reqs[k].done()
        np.testing.assert_array_equal(outs[k], formula(idx[k]))
    with pytest.raises(dds.BadStateError, match="already waited"):
        reqs[0].wait()


def test_request_keeps_arrays_alive(kstore, comm):
    total = ROWS * comm.size
    arr = np.zeros((total, COLS), np.int64)
    alive = weakref.ref(arr)
    req = kstore.get_batch_async("p", arr, list(range(total))[::-1])  # a list: converted, kept
    del arr
    gc.collect()
    assert alive() is not None  # the request holds it while the read may write it
    held = alive()
    req.wait()
    np.testing.assert_array_equal(held, formula(np.arange(total)[::-1]))
    del held
    gc.collect()
    assert alive() is None  # released by the wait


def test_done_polls_to_completion(kstore, comm):
    total = ROWS * comm.size
    out = np.zeros((total, COLS), np.int64)
    req = kstore.get_batch_async("p", out, np.arange(total))
    ev = threading.Event()
    while not req.done():  # the library's thread completes it: no wait needed
        ev.wait(0.005)
    req.wait()
    np.testing.assert_array_equal(out, formula(np.arange(total)))


def test_errors_at_start(kstore, comm):
    total = ROWS * comm.size
    out = np.zeros((2, COLS), np.int64)
    bad_here = comm.rank == 0 or kstore.collective  # a collective start fails on every rank
    if bad_here:
        with pytest.raises(dds.IndexOutOfRangeError, match="out of range"):
            kstore.get_batch_async("p", out, [0, total] if comm.rank == 0 else [0, 1])
    with pytest.raises(dds.UnknownVariableError):
        kstore.get_batch_async("nope", out, [0, 1])
    with pytest.raises(dds.MismatchError):
        kstore.get_batch_async("p", np.zeros((2, COLS), np.float32), [0, 1])
    with pytest.raises(dds.InvalidArgumentError, match="rows"):
        kstore.get_batch_async("p", out, [0, 1, 2])
    req = kstore.get_batch_async("p", out, [total - 1, 0])  # still usable
    req.wait()
    np.testing.assert_array_equal(out, formula([total - 1, 0]))


def test_four_threads(kstore, comm):
    """Four threads each keep four batches in flight; a collective store's
    starts must come from one thread per rank (as get_batch), so there the
    four readers take turns on this thread, in the same order on every rank."""
    total = ROWS * comm.size
    problems = []

    def reader(t):
        rng = np.random.default_rng(100 * comm.rank + t)
        for _ in range(5):
            idx = [rng.integers(0, total, size=30) for _ in range(4)]
            outs = [np.zeros((30, COLS), np.int64) for _ in idx]
            reqs = [kstore.get_batch_async("p", o, i) for o, i in zip(outs, idx)]
            for r, o, i in reversed(list(zip(reqs, outs, idx))):
                r.wait()
                if not np.array_equal(o, formula(i)):
                    problems.append(f"thread {t}: wrong rows")

    if kstore.collective:
        for t in range(4):
            reader(t)
    else:
        threads = [threading.Thread(target=reader, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert not problems, problems


def test_free_with_requests_in_flight(comm):
    for kind in KINDS:
        s = _store(comm, kind)
        total = ROWS * comm.size
        outs = [np.zeros((total, COLS), np.int64) for _ in range(6)]
        reqs = [s.get_batch_async("p", o, np.arange(total)[::-1]) for o in outs]
        s.free()  # waits for them first
        for r, o in zip(reqs, outs):
            r.wait()
            np.testing.assert_array_equal(o, formula(np.arange(total)[::-1]))
        with pytest.raises(dds.BadStateError):
            s.get_batch_async("p", outs[0], np.arange(total))


def test_async_index_boundaries(kstore, comm):
    """test_properties' generated indices through get_batch_async + wait."""
    total = ROWS * comm.size
    collective = kstore.collective

    @settings(max_examples=80, **SETTINGS)
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
            err, _ = outcome(lambda: kstore.get_batch_async("p", out, indices).wait())
            valid = want is not None and all(w is not None and 0 <= w < total for w in want)
            if valid:
                if err is not None:
                    problem = f"get_batch_async({indices!r}) raised {err!r}"
                elif not np.array_equal(out, formula(np.array(want, np.int64)).reshape(n, COLS)):
                    problem = f"get_batch_async({indices!r}) read {out.tolist()}"
            elif err is None:
                problem = f"get_batch_async({indices!r}) did not raise"
            elif not (out == -5).all():
                problem = f"a refused get_batch_async({indices!r}) wrote the destination"
        except Exception as exc:
            problem = f"get_batch_async({indices!r}) raised {type(exc).__name__}: {exc}"
        if collective:
            all_pass(comm, problem)
        else:
            assert problem is None, problem

    prop()


def test_done_while_another_thread_waits(kstore, comm):
    """done() never blocks, even while another thread is in wait()."""
    total = ROWS * comm.size
    out = np.zeros((total, COLS), np.int64)
    req = kstore.get_batch_async("p", out, np.arange(total))
    waiter = threading.Thread(target=req.wait)
    waiter.start()
    seen = [req.done() for _ in range(50)]
    waiter.join()
    assert req.done() and all(isinstance(d, bool) for d in seen)
    np.testing.assert_array_equal(out, formula(np.arange(total)))
