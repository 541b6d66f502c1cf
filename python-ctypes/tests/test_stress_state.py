"""Stateful property test (hypothesis's RuleBasedStateMachine) of sequences
of add / update / get / get_batch / get_batch_async (waited in drawn
orders, some left in flight across other steps) / free the store and create
a new one, checked against a numpy model of every variable (issue 35, item
7: a wrong-rows event seen once on a loaded machine).

Every rank draws the same sequence (derandomized, no database), so the
collective calls (add, method 0's collective get_batch and starts, store
creation) stay matched; each step all-gathers its name and arguments (a
check that the ranks agree, and a barrier) and every check's outcome, so all
ranks fail, and shrink, together. Per rank, reads ask for rows rotated by the
rank, so ranks read different rows of the same owners.

Configurations: method 0 in both batch modes and method 1 on shm and tcp,
node-local reads on and off. `make test` runs a bounded form
(DDSTORE_STRESS_EXAMPLES sequences, default 2 (1 on tcp), of up to
DDSTORE_STRESS_STEPS steps, default 15, per configuration, at 1 and 2 ranks;
1 sequence per configuration at 4); the long form is
documented in docs/guarantees.md ("Stress of the read paths").
"""

import os
import zlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from mpi4py import MPI

import pyddstore as dds
from helpers import METHODS

# The stress is a 2-rank design (the issue's); above 2 ranks, where every
# collective step costs several times more on 2 cores, one sequence per
# configuration unless asked for more.
EXAMPLES = int(os.environ.get("DDSTORE_STRESS_EXAMPLES", "2" if MPI.COMM_WORLD.size <= 2 else "1"))
# DDSTORE_STRESS_SEED: another (still identical on every rank) sequence of
# sequences, for long runs in several parts; unset, the derandomized one.
SEED = os.environ.get("DDSTORE_STRESS_SEED")
UPDATE_IN_FLIGHT = os.environ.get("DDSTORE_STRESS_UPDATE_IN_FLIGHT") == "1"
STEPS = int(os.environ.get("DDSTORE_STRESS_STEPS", "15"))
# DDSTORE_STRESS_CONFIGS: a comma-separated subset of CONFIGS' ids (long runs).
ONLY = [c for c in os.environ.get("DDSTORE_STRESS_CONFIGS", "").split(",") if c]

CONFIGS = []
for nl in ("1", "0"):
    if 0 in METHODS:
        for mode in ("collective", "onesided"):
            CONFIGS.append(pytest.param(0, mode, None, nl, id=f"m0-{mode}-nl{nl}"))
    if 1 in METHODS:
        for prov in ("shm", "tcp"):
            CONFIGS.append(pytest.param(1, None, prov, nl, id=f"m1-{prov}-nl{nl}"))
if ONLY:
    CONFIGS = [c for c in CONFIGS if c.id in ONLY]

NAMES = ("a", "b", "c")
DTYPES = (np.float64, np.int32, np.uint8)
MAX_LOCAL = 12


def values(serial, rank, rows, cols, dtype, gen=0):
    """Rank `rank`'s shard of variable number `serial` (version `gen`):
    distinct per variable, rank, row, column and update."""
    base = (serial * 1009 + gen * 7919 + rank * 97) % 251
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(cols, dtype=np.int64)[None, :]
    v = (base + r * 31 + c * 7 + gen) % 251
    return v.astype(dtype)


class StoreMachine(RuleBasedStateMachine):
    """One store at a time; `model[name]` is the whole variable (all ranks'
    shards in rank order), `counts[name]` the rows per rank."""

    config = None  # (method, batch mode, provider, node-local), set per run

    def __init__(self):
        super().__init__()
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.rank, self.comm.size
        self.serial = 0
        self.model, self.counts, self.dtypes = {}, {}, {}
        self.pending = []  # (request, destination, expected rows)
        self.step = 0
        self.stores = 0
        self.store = self._create()

    # -- helpers -------------------------------------------------------------

    def _create(self):
        method, mode, prov, nl = self.config
        env = {"DDSTORE_NODE_LOCAL": nl}
        if prov:
            env["DDSTORE_FABRIC"] = prov
        with mock.patch.dict(os.environ, env):
            store = dds.PyDDStore(self.comm, method=method, batch_mode=mode)
        self.stores += 1
        return store

    def _batch(self, what, pick, picks):
        """A batch step's variable, rows and destination (agreed by every rank)."""
        name = sorted(self.model)[pick % len(self.model)]
        self._same_step(f"{what} {name} {picks}")
        idx = self._rows(name, picks)
        return name, idx, self._dst(name, len(idx))

    def _same_step(self, what):
        """Every rank is at the same step with the same arguments."""
        self.step += 1
        sig = zlib.crc32(f"{self.step}:{what}".encode())
        sigs = self.comm.allgather(sig)
        assert len(set(sigs)) == 1, f"ranks drew different steps at step {self.step}: {what}"

    def _all_ok(self, ok, what):
        """Fails on every rank when the check failed on any, naming them."""
        bad = [r for r, f in enumerate(self.comm.allgather(bool(ok))) if not f]
        assert not bad, f"step {self.step} (store {self.stores}): {what}: wrong on rank(s) {bad}"

    def _rows(self, name, picks):
        """This rank's indices for the drawn `picks`: rotated by the rank."""
        total = self.model[name].shape[0]
        return (np.asarray(picks, np.int64) + self.rank * 3) % total

    def _dst(self, name, n):
        # Filled with a marker, so rows that never landed show.
        return np.full((n, self.model[name].shape[1]), 0xAB, dtype=self.dtypes[name])

    def _check(self, name, got, idx, what):
        want = self.model[name][idx]
        ok = np.array_equal(got, want)
        detail = ""
        if not ok:
            bad = np.nonzero(~np.all(got == want, axis=1))[0]
            detail = f" rows {idx[bad][:8].tolist()} (of {len(idx)})"
        self._all_ok(ok, f"{what} of '{name}'{detail}")

    def _wait_all(self):
        while self.pending:
            self._wait_one(0)

    def _wait_one(self, k):
        req, dst, name, idx, ver = self.pending.pop(k)
        req.wait()
        ok = np.array_equal(dst, ver[idx])
        detail = "" if ok else f" rows {idx[~np.all(dst == ver[idx], axis=1)][:8].tolist()}"
        self._all_ok(ok, f"get_batch_async of '{name}'{detail}")

    # -- rules ---------------------------------------------------------------

    @precondition(lambda self: len(self.model) < len(NAMES))
    @rule(rows=st.lists(st.integers(0, MAX_LOCAL), min_size=4, max_size=4),
          cols=st.integers(1, 6), dt=st.sampled_from(range(len(DTYPES))))
    def add(self, rows, cols, dt):
        name = next(n for n in NAMES if n not in self.model)
        counts = [rows[r % 4] for r in range(self.size)]
        if sum(counts) == 0:
            counts[0] = 1
        self._same_step(f"add {name} {counts} {cols} {dt}")
        self.serial += 1
        dtype = DTYPES[dt]
        parts = [values(self.serial, r, counts[r], cols, dtype) for r in range(self.size)]
        self.store.add(name, parts[self.rank])
        self.model[name] = np.concatenate(parts)
        self.counts[name] = counts
        self.dtypes[name] = dtype

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 2), offset=st.integers(0, MAX_LOCAL), n=st.integers(1, MAX_LOCAL),
          gen=st.integers(1, 1000))
    def update(self, pick, offset, n, gen):
        name = sorted(self.model)[pick % len(self.model)]
        self._same_step(f"update {name} {offset} {n} {gen}")
        # Reads in flight see either version (docs/guarantees.md): land them
        # first. DDSTORE_STRESS_UPDATE_IN_FLIGHT=1 skips that, to show what a
        # harness that forgets it reports (the first suspect of issue 35's
        # wrong-rows event): rows differing from the model as of the start.
        if not UPDATE_IN_FLIGHT:
            self._wait_all()
        cols = self.model[name].shape[1]
        start = 0
        for r, c in enumerate(self.counts[name]):
            o = min(offset, c)
            k = min(n, c - o)
            rows = values(self.serial * 13 + r, r, k, cols, self.dtypes[name], gen)
            if r == self.rank and k > 0:
                self.store.update(name, rows, o)
            self.model[name][start + o:start + o + k] = rows
            start += c
        self.comm.Barrier()  # updates visible to every reader (guarantees.md)

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 2), first=st.integers(0, 10**6), n=st.integers(0, MAX_LOCAL))
    def get(self, pick, first, n):
        name = sorted(self.model)[pick % len(self.model)]
        self._same_step(f"get {name} {first} {n}")
        counts = self.counts[name]
        # Rows inside one shard: the owner chosen by the draw, rotated by rank.
        owners = [r for r, c in enumerate(counts) if c > 0]
        owner = owners[(first + self.rank) % len(owners)]
        lo = sum(counts[:owner])
        s = lo + first % counts[owner]
        n = min(n, lo + counts[owner] - s)
        dst = self._dst(name, n)
        self.store.get(name, dst, s)
        self._check(name, dst, np.arange(s, s + n), "get")

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 2), picks=st.lists(st.integers(0, 10**6), max_size=24))
    def get_batch(self, pick, picks):
        name, idx, dst = self._batch("get_batch", pick, picks)
        self.store.get_batch(name, dst, idx)
        self._check(name, dst, idx, "get_batch")

    @precondition(lambda self: self.model and len(self.pending) < 8)
    @rule(pick=st.integers(0, 2), picks=st.lists(st.integers(0, 10**6), max_size=24))
    def start_async(self, pick, picks):
        name, idx, dst = self._batch("start", pick, picks)
        req = self.store.get_batch_async(name, dst, idx)
        # The model as it is now (updates wait for the requests in flight).
        self.pending.append((req, dst, name, idx, self.model[name].copy()))

    @precondition(lambda self: self.pending)
    @rule(order=st.lists(st.integers(0, 7), min_size=1, max_size=8))
    def wait_some(self, order):
        self._same_step(f"wait {order} of {len(self.pending)}")
        for k in order:
            if self.pending:
                self._wait_one(k % len(self.pending))

    @rule(wait_first=st.booleans())
    def new_store(self, wait_first):
        """Frees the store (requests still in flight are waited for by the
        library; their rows are checked afterwards) and creates a new one."""
        self._same_step(f"new_store {wait_first}")
        if wait_first:
            self._wait_all()
        self.store.free()
        # Requests outlive their store: their waits return the read's status.
        self._wait_all()
        self.model, self.counts, self.dtypes = {}, {}, {}
        self.store = self._create()

    @invariant()
    def ranks_agree(self):
        pass

    def teardown(self):
        try:
            self._wait_all()
        finally:
            self.store.free()


@pytest.mark.parametrize("method,mode,prov,nl", CONFIGS)
def test_read_sequences_match_the_model(comm, method, mode, prov, nl):
    # tcp stores take seconds to make here: half the sequences in the bounded form.
    n = max(1, EXAMPLES // 2) if prov == "tcp" and "DDSTORE_STRESS_EXAMPLES" not in os.environ else EXAMPLES
    class Machine(StoreMachine):
        config = (method, mode, prov, nl)

    if SEED is not None:
        Machine = seed(int(SEED))(Machine)
    run_state_machine_as_test(
        Machine,
        settings=settings(max_examples=n, stateful_step_count=STEPS, derandomize=SEED is None, database=None,
                          deadline=None, print_blob=False,
                          suppress_health_check=list(HealthCheck)),
    )
    if comm.rank == 0 and EXAMPLES > 10:
        print(f"\nstress {method}/{mode or prov}/nl{nl}: {EXAMPLES} sequences of up to {STEPS} steps passed")
