"""pyddstore.settings() and PyDDStore.settings: what the library resolved
from the environment and the options, which the Python layer now uses
instead of reading the environment itself (batch mode, GPU support,
profiling, the hand-shake directory).

The environment is drawn by hypothesis: unset, every accepted spelling in
mixed case with blanks around it, and arbitrary text; the test's own model
of the documented rules gives the expected report, or the variable an
InvalidArgumentError must name. Every rank draws the same (derandomized)
sequence, so the stores made from it are created together."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyddstore as dds
from mpi4py import MPI
from helpers import METHODS, handshake_dir

COMM = MPI.COMM_WORLD
SETTINGS = dict(derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

ON, OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")
# variable -> (accepted spelling -> meaning, the default when unset or empty)
RULES = {
    "DDSTORE_BATCH_MODE": ({"collective": "collective", "onesided": "onesided", "one-sided": "onesided"},
                           "collective"),
    "DDSTORE_GPU": ({**{s: "off" for s in OFF + ("host",)}, **{s: "auto" for s in ON + ("auto",)},
                     "require": "require", "required": "require", "2": "require"}, "auto"),
    "DDSTORE_PROFILE": ({**{s: True for s in ON}, **{s: False for s in OFF}}, False),
    "DDSTORE_NODE_LOCAL": ({**{s: True for s in ON}, **{s: False for s in OFF}}, True),
    "DDSTORE_GPU_STAGING": ({**{s: True for s in ON}, **{s: False for s in OFF}}, True),
}
KEY = {"DDSTORE_BATCH_MODE": "batch_mode", "DDSTORE_GPU": "gpu", "DDSTORE_PROFILE": "profiling",
       "DDSTORE_NODE_LOCAL": "node_local", "DDSTORE_GPU_STAGING": "gpu_staging"}


def spelling(accepted):
    """None (unset), an accepted value in any case with blanks, or any text."""
    known = st.tuples(st.sampled_from(sorted(accepted)), st.booleans(), st.sampled_from(["", " ", "\t"]))
    return st.one_of(
        st.none(),
        known.map(lambda t: t[2] + (t[0].upper() if t[1] else t[0]) + t[2]),
        st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=6),
    )


ENV = st.fixed_dictionaries({var: spelling(rules) for var, (rules, _) in RULES.items()})


def expected(env):
    """(report fields, None) or (None, the malformed variable rank 0 sees first)."""
    want = {}
    for var, (rules, default) in RULES.items():
        raw = env[var]
        if raw is None or raw == "":
            want[KEY[var]] = default
            continue
        meaning = rules.get(raw.strip().lower())
        if meaning is None:
            return None, var
        want[KEY[var]] = meaning
    return want, None


@pytest.fixture
def clean_env():
    saved = {v: os.environ.get(v) for v in (*RULES, "DDSTORE_HANDSHAKE_DIR")}
    yield
    for v, old in saved.items():
        if old is None:
            os.environ.pop(v, None)
        else:
            os.environ[v] = old


def apply(env):
    for var, raw in env.items():
        if raw is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = raw


@settings(max_examples=120, **SETTINGS)
@given(env=ENV)
def test_settings_follow_the_environment(clean_env, env):
    apply(env)
    want, bad = expected(env)
    if bad is not None:
        with pytest.raises(dds.InvalidArgumentError) as e:
            dds.settings()
        # The library checks the variables in its own order: the one it
        # names is one of this example's malformed ones.
        malformed = [v for v in RULES if expected({**{w: None for w in RULES}, v: env[v]})[1]]
        assert bad in malformed and any(v in str(e.value) for v in malformed), (str(e.value), env)
        return
    got = dds.settings()
    for k, v in want.items():
        assert got[k] == v, (k, env)
    assert got["method"] == 0 and got["role"] == "core"
    assert got["handshake_dir"] == "./ddstore_hs"


@settings(max_examples=12, **SETTINGS)
@given(env=ENV.filter(lambda e: expected(e)[0] is not None and expected(e)[0]["gpu"] != "require"),
       method=st.sampled_from(METHODS), batch=st.sampled_from([None, "collective", "onesided"]))
def test_a_store_reports_what_it_runs_with(clean_env, env, method, batch):
    apply(env)
    want, _ = expected(env)
    kw = {"handshake_dir": handshake_dir()} if method == 2 else {}
    store = dds.PyDDStore(COMM, method=method, batch_mode=batch, **kw)
    try:
        got = store.settings
        mode = "onesided" if method != 0 else (batch or want["batch_mode"])
        assert got["batch_mode"] == mode == store.batch_mode
        assert got["method"] == method
        for k in ("gpu", "profiling", "node_local", "gpu_staging"):
            assert got[k] == want[k], (k, env)
        if method == 2:
            assert store.handshake_dir == kw["handshake_dir"]
        # The Python layer's own timers follow the library's profiling switch.
        store.add("v", np.arange(4 * COMM.size, dtype=np.int64).reshape(-1, 1)[4 * COMM.rank:4 * COMM.rank + 4])
        out = np.zeros(1, np.int64)
        store.get("v", out, 0)
        assert out[0] == 0
        assert (store.get_profile("v")["py_gets"] > 0) == want["profiling"]
    finally:
        store.free()


def test_handshake_dir_default_comes_from_the_library(clean_env):
    os.environ["DDSTORE_HANDSHAKE_DIR"] = "/tmp/dds-py-settings"
    assert dds.settings()["handshake_dir"] == "/tmp/dds-py-settings"
    pytest.importorskip("torch")  # installed wherever the torch layer is tested
    from pyddstore.torch._schema import _handshake_dir
    assert _handshake_dir(None) == "/tmp/dds-py-settings"
    assert _handshake_dir("/elsewhere") == "/elsewhere"
    del os.environ["DDSTORE_HANDSHAKE_DIR"]
    assert _handshake_dir(None) == "./ddstore_hs"


def test_node_local_off_on_one_rank_is_reported_everywhere(clean_env):
    """Settings the ranks agree on are reported as agreed (issue 35):
    DDSTORE_NODE_LOCAL=0 on the last rank only turns node-local copies off
    on every rank, and every rank's settings say so."""
    if COMM.size < 2:
        pytest.skip("needs two ranks")
    for var in RULES:
        os.environ.pop(var, None)
    if COMM.rank == COMM.size - 1:
        os.environ["DDSTORE_NODE_LOCAL"] = "0"
    for method in [m for m in METHODS if m < 2]:
        store = dds.PyDDStore(COMM, method=method)
        try:
            seen = COMM.allgather(store.settings["node_local"])
            assert seen == [False] * COMM.size, (method, seen)
        finally:
            store.free()
