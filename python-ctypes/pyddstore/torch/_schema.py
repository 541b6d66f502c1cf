"""Sample schema of pyddstore.torch: flattening a sample into fields (one
store variable each), rebuilding it, and the small helpers the datasets
share (how rows are split over ranks, safe variable names, agreement)."""

import hashlib
import os

import numpy as np
import torch

from .._args import DTYPE_NAMES

SUPPORTED_DTYPES = DTYPE_NAMES  # the package's one list (pyddstore._args)
_RECORD_KINDS = ("record", "structarray", "recarray")


# Sample schema: flattening a sample into fields, and rebuilding it.

def _flatten(sample):
    """(structure, keys, leaves) of a sample; TypeError for nested containers."""
    if isinstance(sample, dict):
        structure, keys, leaves = "dict", [str(k) for k in sample], list(sample.values())
        if len(set(keys)) != len(keys):
            raise ValueError(f"dict keys {list(sample)!r} collide once turned into strings")
    elif isinstance(sample, tuple):
        structure, leaves = "tuple", list(sample)
        keys = [str(i) for i in range(len(leaves))]
    elif isinstance(sample, list):
        structure, leaves = "list", list(sample)
        keys = [str(i) for i in range(len(leaves))]
    else:
        return "single", ["0"], [sample]
    for v in leaves:
        if isinstance(v, (dict, list, tuple)):
            raise TypeError(f"nested containers are not supported (a {type(v).__name__} inside a "
                            f"{structure} sample); flatten the sample, e.g. with encode=")
    return structure, keys, leaves


def _descr_to_json(descr):
    """numpy's array-protocol description of a structured dtype, tuples -> lists."""
    if isinstance(descr, (list, tuple)):
        return [_descr_to_json(d) for d in descr]
    return descr


def _descr_from_json(descr):
    """Reverse of _descr_to_json: each field back to a tuple, with a (title, name)
    pair, a nested description or a shape tuple where the lists stood for one."""
    fields = []
    for item in descr:
        name, typ = item[0], item[1]
        if isinstance(name, list):
            name = tuple(name)
        if isinstance(typ, list):
            typ = _descr_from_json(typ)
        if len(item) > 2:
            fields.append((name, typ, tuple(item[2])))
        else:
            fields.append((name, typ))
    return fields


def _record_dtype(descr):
    return np.lib.format.descr_to_dtype(_descr_from_json(descr))


def _check_dtype(name, what):
    if name not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {name} ({what}); supported: {', '.join(SUPPORTED_DTYPES)}")


def _leaf_spec(v):
    """The field spec {kind, dtype, shape[, record]} of one leaf value."""
    if isinstance(v, (np.void, np.ndarray)) and v.dtype.names:
        if v.dtype.hasobject:
            raise TypeError(f"structured dtype {v.dtype} holds Python objects; it cannot be stored")
        if isinstance(v, np.void):
            kind, shape = "record", []
        else:
            kind = "recarray" if isinstance(v, np.recarray) else "structarray"
            shape = list(v.shape)
        return {"kind": kind, "dtype": "uint8", "shape": shape,
                "record": _descr_to_json(v.dtype.descr)}
    if isinstance(v, torch.Tensor):
        name = str(v.dtype).replace("torch.", "")
        _check_dtype(name, "torch tensor")
        return {"kind": "torch", "dtype": name, "shape": list(v.shape)}
    if isinstance(v, np.ndarray):
        _check_dtype(v.dtype.name, "numpy array")
        return {"kind": "numpy", "dtype": v.dtype.name, "shape": list(v.shape)}
    if isinstance(v, np.generic):  # before float/int: np.float64 is a float
        _check_dtype(v.dtype.name, "numpy scalar")
        return {"kind": "npscalar", "dtype": v.dtype.name, "shape": []}
    if isinstance(v, bool):
        return {"kind": "py", "dtype": "bool", "shape": []}
    if isinstance(v, int):
        return {"kind": "py", "dtype": "int64", "shape": []}
    if isinstance(v, float):
        return {"kind": "py", "dtype": "float64", "shape": []}
    raise TypeError(f"unsupported value of type {type(v).__name__}; use tensors, numpy arrays "
                    "or Python/numpy numbers (or encode= to turn it into those)")


def _schema_and_leaves(sample):
    structure, keys, leaves = _flatten(sample)
    schema = {"structure": structure, "keys": keys, "fields": [_leaf_spec(v) for v in leaves]}
    return schema, leaves


def _schema_of(sample):
    return _schema_and_leaves(sample)[0]


class _Field:
    """One field of a schema: how its values become rows and come back."""

    __slots__ = ("key", "skey", "var", "kind", "dtype", "shape", "width", "record", "tdtype", "spec")

    def __init__(self, spec, skey, key, var):
        self.spec = spec
        self.skey, self.key, self.var = skey, key, var
        self.kind = spec["kind"]
        self.dtype = np.dtype(spec["dtype"])
        self.shape = tuple(int(n) for n in spec["shape"])
        self.record = _record_dtype(spec["record"]) if self.kind in _RECORD_KINDS else None
        elems = 1
        for n in self.shape:
            elems *= n
        self.width = elems * (self.record.itemsize if self.record is not None else 1)
        self.tdtype = getattr(torch, spec["dtype"]) if self.kind == "torch" else None

    # -- encoding: one value -> one flat row ------------------------------

    def row(self, v):
        kind = self.kind
        if kind == "torch":
            return v.detach().cpu().numpy().reshape(-1)
        if kind in _RECORD_KINDS:
            return np.ascontiguousarray(np.asarray(v)).reshape(-1).view(np.uint8)
        return np.asarray(v).reshape(-1)

    # -- decoding (views of the buffer, no copies) -------------------------

    def one(self, row):
        """The value of one sample from its row (a 1-D array or tensor)."""
        kind = self.kind
        if kind == "torch":
            if isinstance(row, np.ndarray):
                # Shaped by numpy first: torch's reshape costs more than the
                # read of a small sample (DistDataset.__getitem__).
                return torch.from_numpy(row if row.shape == self.shape else row.reshape(self.shape))
            return row.reshape(self.shape)
        if kind == "numpy":
            return row.reshape(self.shape)
        if kind == "record":
            return row.view(self.record)[0]
        if kind == "structarray":
            return row.view(self.record).reshape(self.shape)
        if kind == "recarray":
            return row.view(self.record).reshape(self.shape).view(np.recarray)
        if kind == "npscalar":
            return row[0]
        return row[0].item()  # py

    def column(self, buf, n):
        """The values of n samples from an (n, width) buffer, shaped (n, *shape)."""
        kind = self.kind
        shape = (n,) + self.shape
        if kind == "torch":
            if isinstance(buf, np.ndarray):
                buf = torch.from_numpy(buf)
            return buf.reshape(shape)
        if kind == "record":
            return buf.view(self.record).reshape(n)
        if kind == "structarray":
            return buf.view(self.record).reshape(shape)
        if kind == "recarray":
            return buf.view(self.record).reshape(shape).view(np.recarray)
        return buf.reshape(shape)

    def info_dtype(self):
        return self.record if self.record is not None else self.dtype.name


def _share(total, parts, i):
    """[lo, hi) of part i of a balanced split of `total` items into `parts`."""
    q, r = divmod(total, parts)
    lo = i * q + min(i, r)
    return lo, lo + q + (1 if i < r else 0)


def _safe_name(name):
    """The hand-shake file stem of dataset `name`: a readable part (characters
    other than letters, digits, '-' and '_' become '_', at most 64) and a hash
    of the exact name, so that distinct names ('a.b', 'a_b') never share a file."""
    exact = name.encode("utf-8", "surrogatepass")
    readable = "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in name[:64])
    return f"{readable}-{hashlib.sha256(exact).hexdigest()[:16]}"


def _handshake_dir(handshake_dir):
    """The explicit directory, else the one the library would use."""
    if handshake_dir:
        return handshake_dir
    import pyddstore
    return pyddstore.settings()["handshake_dir"]


def _agree(comm, value, err):
    """All-gathers (value, error) over `comm`; if any rank had an error, every
    rank raises the first one in rank order (TypeError stays TypeError, any
    other exception becomes ValueError). Returns the list of values."""
    info = None
    if err is not None:
        info = (isinstance(err, TypeError), f"{err}" or type(err).__name__)
    gathered = comm.allgather((value, info))
    for r, (_, e) in enumerate(gathered):
        if e is not None:
            is_type, msg = e
            cls = TypeError if is_type else ValueError
            text = msg if comm.size == 1 else f"{msg} (on rank {r})"
            if r == comm.rank:
                raise cls(text) from err
            raise cls(text)
    return [v for v, _ in gathered]


class _Encoded:
    """source[i] passed through encode()."""

    def __init__(self, source, encode):
        self.source, self.encode = source, encode

    def __len__(self):
        return len(self.source)

    def __getitem__(self, i):
        return self.encode(self.source[i])


def _fields_encoder(fields):
    if isinstance(fields, (str, int)):
        fields = [fields]
    keys = list(fields)

    def encode(sample):
        if isinstance(sample, dict):
            missing = [k for k in keys if k not in sample]
            if missing:
                raise ValueError(f"fields={keys!r}: not in the sample: {missing!r} "
                                 f"(its keys are {list(sample)!r})")
            return {k: sample[k] for k in keys}
        if isinstance(sample, (tuple, list)):
            n = len(sample)
            bad = [k for k in keys
                   if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < n]
            if bad:
                raise ValueError(f"fields={keys!r}: not in the sample: {bad!r} "
                                 f"(a {type(sample).__name__} of {n} items)")
            picked = [sample[k] for k in keys]
            return tuple(picked) if isinstance(sample, tuple) else picked
        raise ValueError(f"fields= needs dict, tuple or list samples, got {type(sample).__name__}")

    return encode
