"""Sample sources and comparisons shared by the pyddstore.torch tests.

N = 37 samples: not a multiple of the rank count, so shares differ in size.
"""

import numpy as np
import torch

from helpers import METHODS, handshake_dir

N = 37

# Four ranks of torch on two cores: one intra-op thread each keeps them from
# spinning against each other.
torch.set_num_threads(1)


class TupleSource:
    """(3x4 float32 tensor, int, float64 array of 2, np.int32, bool, float, uint8 tensor of 2)."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(i)
        return (
            torch.arange(12, dtype=torch.float32).reshape(3, 4) + i,
            i * 3 - 50,
            np.array([i / 7, -i], np.float64),
            np.int32(1000 + i),
            i % 3 == 0,
            i * 0.25,
            torch.tensor([i % 256, 255 - i], dtype=torch.uint8),
        )


class DictSource:
    """{"x": 2x3 float tensor, "y": 0-d int64 tensor}."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(i)
        return {"x": torch.full((2, 3), float(i)) + torch.arange(3.0), "y": torch.tensor(i * 11)}


class SingleSource:
    """An int32 array of 5."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(i)
        return np.arange(5, dtype=np.int32) * (i + 1)


SOURCES = {"tuple": TupleSource, "dict": DictSource, "single": SingleSource}

# Structured records.
REC = np.dtype([("id", "<i4"), ("pos", "<f4", (3,)), ("ok", "?")])
INNER = np.dtype([("a", "u1"), ("b", "<f8")], align=True)
NESTED = np.dtype([("id", "<i2"), ("in", INNER), ("v", "<f4", (2,))], align=True)


def _records(dtype, n, i):
    out = np.zeros(n, dtype)
    for k in range(n):
        j = i * 10 + k
        if dtype is NESTED:
            out[k]["id"] = j
            out[k]["in"]["a"] = j % 200
            out[k]["in"]["b"] = j / 3
            out[k]["v"] = (j, -j)
        else:
            out[k]["id"] = j
            out[k]["pos"] = (j, j / 2, -j)
            out[k]["ok"] = j % 2 == 0
    return out


class RecordSource:
    """Records as np.void ("void"), a 1-element structured array ("array"), a
    2-element recarray ("recarray"), an aligned nested record ("nested"), or
    a dict of a record and a tensor ("dict")."""

    KINDS = ("void", "array", "recarray", "nested", "dict")

    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        return N

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(i)
        if self.kind == "void":
            return _records(REC, 1, i)[0]
        if self.kind == "array":
            return _records(REC, 1, i)
        if self.kind == "recarray":
            return _records(REC, 2, i).view(np.recarray)
        if self.kind == "nested":
            return _records(NESTED, 1, i)[0]
        return {"rec": _records(REC, 1, i)[0], "t": torch.full((2,), i / 4)}


class Group:
    """A per-group Python object: not storable, restored by decode."""

    def __init__(self, name):
        self.name = name


GROUPS = [Group("even"), Group("odd")]
LABELS = ["cat", "dog", "emu"]
LABEL_ID = {name: k for k, name in enumerate(LABELS)}


class Labeled:
    """{"group": int, "obj": Group, "label": str, "x": tensor}: strings and objects."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(i)
        g = i % 2
        return {"group": g, "obj": GROUPS[g], "label": LABELS[i % 3], "x": torch.full((2,), float(i))}


def encode_labeled(s):
    return {"group": s["group"], "label": LABEL_ID[s["label"]], "x": s["x"]}


def decode_labeled(s, index):
    return {"group": s["group"], "obj": GROUPS[s["group"]], "label": LABELS[s["label"]],
            "x": s["x"], "index": index}


def expected_labeled(i):
    s = dict(Labeled()[i])
    s["index"] = i
    return s


def same(a, b):
    """Exact equality of samples or batches: structure, container and value
    types, dtypes, shapes and values. Returns True or raises AssertionError
    naming the first difference."""
    _same(a, b, "sample")
    return True


def _same(a, b, where):
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
        assert a.device == b.device, f"{where}: device {a.device} vs {b.device}"
        assert torch.equal(a, b), f"{where}: values differ"
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        assert np.array_equal(a, b), f"{where}: values differ"
    elif isinstance(a, np.void):
        assert a.dtype == b.dtype, f"{where}: {a.dtype} vs {b.dtype}"
        assert a.tobytes() == b.tobytes() or a == b, f"{where}: values differ"
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a == b, f"{where}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


class Checks:
    """Collects failed checks instead of raising at once, so that every rank
    gets through the test's collectives and teardown; assert agree(comm,
    checks.ok) at the end."""

    def __init__(self):
        self.errors = []

    @property
    def ok(self):
        return not self.errors

    def same(self, a, b, what="sample"):
        try:
            _same(a, b, what)
        except AssertionError as e:
            self.errors.append(str(e))

    def true(self, cond, what):
        if not cond:
            self.errors.append(what)

    def raises(self, exc, fn, what, match=None):
        try:
            fn()
        except exc as e:
            if match is not None and match not in str(e):
                self.errors.append(f"{what}: message {str(e)!r} lacks {match!r}")
            return e
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"{what}: raised {type(e).__name__}: {e}, not {exc.__name__}")
            return None
        self.errors.append(f"{what}: did not raise {exc.__name__}")
        return None


def teardown(comm, ds):
    """Every rank has finished reading before the store goes (collective for method 0)."""
    comm.Barrier()
    ds.ddstore.free()


def ds_kwargs(method, **kw):
    """DistDataset keyword arguments for `method` (a fresh handshake
    directory for method 2: call on every rank, in the same order)."""
    kw["method"] = method
    if method == 2:
        kw.setdefault("handshake_dir", handshake_dir("-torch"))
    return kw


def threads_for(method):
    """Loader threads: one for method 0 (its batched reads are collective)."""
    return 1 if method == 0 else 2


__all__ = ["METHODS", "N", "SOURCES", "TupleSource", "DictSource", "SingleSource", "RecordSource",
           "Labeled", "GROUPS", "LABELS", "encode_labeled", "decode_labeled", "expected_labeled",
           "same", "Checks", "teardown", "ds_kwargs", "threads_for", "REC", "NESTED"]
