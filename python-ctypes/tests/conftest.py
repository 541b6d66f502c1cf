"""Run under mpiexec: every rank runs every test, in the same order.

mpi4py is configured before MPI starts: THREAD_MULTIPLE, as the C tests use
(the register_recv test reads from two threads for one-sided methods).
"""

import mpi4py

mpi4py.rc.thread_level = "multiple"

from mpi4py import MPI  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def comm():
    """MPI.COMM_WORLD; a barrier after each test so every rank has torn the
    test down before any rank starts the next test's collectives."""
    world = MPI.COMM_WORLD
    yield world
    world.Barrier()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Makes every rank report the same outcome: a test that failed on some
    rank fails on all of them, naming the ranks."""
    report = yield
    if report.when == "call" and MPI.Is_initialized() and not MPI.Is_finalized():
        failed = MPI.COMM_WORLD.allgather(bool(report.failed))
        bad = [r for r, f in enumerate(failed) if f]
        if bad and not report.failed:
            report.outcome = "failed"
            report.longrepr = f"failed on rank(s) {bad}"
    return report
