"""PyTorch datasets and a thread-based loader over libddstore (DDStore 3.0's
``pyddstore.torch``).

* :class:`DistDataset` spreads the samples of any map-style dataset over the
  ranks of a communicator, one store variable per sample field, and reads any
  sample back from any rank.
* :class:`DistDatasetReader` reads a dataset that a ``DistDataset`` published
  with ``method=2`` from a separate job.
* :class:`WindowedDataset` builds samples from several stored rows (time
  windows, clips) without storing a row twice.
* :func:`row_of` maps (sub-dataset, index) of a ``ConcatDataset`` to its row.
* :class:`ThreadDataLoader` is a ``DataLoader`` whose workers are threads of
  the calling process.

Importing this module imports torch, and neither mpi4py nor the library: MPI
starts when the first dataset is constructed, after torch was loaded. See
docs/pytorch.md.
"""

import collections
import hashlib
import concurrent.futures
import json
import logging
import operator
import os
import queue
import threading
import time
import weakref

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, default_collate

from . import _args  # numpy only: the store (_core, _lib) is loaded on first use
from ._errors import InvalidArgumentError

try:  # the helper DataLoader itself uses for pin_memory=True
    from torch.utils.data._utils.pin_memory import pin_memory as _pin_memory
except ImportError:  # pragma: no cover
    _pin_memory = None

__all__ = ["DistDataset", "DistDatasetReader", "ThreadDataLoader", "WindowedDataset", "row_of"]

logger = logging.getLogger("pyddstore.torch")

SUPPORTED_DTYPES = ("bool", "uint8", "int32", "int64", "float32", "float64")
_RECORD_KINDS = ("record", "structarray", "recarray")
_POLL_S = 0.05


# ---------------------------------------------------------------------------
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
                row = torch.from_numpy(row)
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
    return handshake_dir or os.environ.get("DDSTORE_HANDSHAKE_DIR") or "./ddstore_hs"


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


# ---------------------------------------------------------------------------
# Reads in flight (prefetch).

class _PendingBatch:
    """The requests of one batch's reads (one per field) and how to make the
    batch from its buffers once they are in."""

    def __init__(self, reqs, build):
        self._reqs = reqs
        self._build = build

    def result(self):
        """Waits for every request (even after one fails), then builds."""
        err = None
        reqs, self._reqs = self._reqs, []
        for r in reqs:
            try:
                r.wait()
            except Exception as exc:
                err = err or exc
        if err is not None:
            raise err
        return self._build()

    def drain(self):
        """Waits for the reads and drops them (the buffers are free afterwards)."""
        reqs, self._reqs = self._reqs, []
        for r in reqs:
            try:
                r.wait()
            except Exception:
                pass


def _prefetch_arg(prefetch):
    k = operator.index(prefetch)
    if k < 0:
        raise ValueError(f"prefetch must be 0 or more batches, got {k}")
    return k


# ---------------------------------------------------------------------------
# The reading API shared by DistDataset and DistDatasetReader.

class _StoredDataset(Dataset):
    """Reading side of a dataset stored as one variable per field."""

    ddstore = None
    decode = None

    def _setup_reading(self, schema, name, device, total_ns):
        self.schema = schema
        self.name = name
        self.device = device
        self.total_ns = int(total_ns)
        structure = schema["structure"]
        self._structure = structure
        self._fields = []
        for pos, (skey, spec) in enumerate(zip(schema["keys"], schema["fields"])):
            key = skey if structure == "dict" else pos
            self._fields.append(_Field(spec, skey, key, f"{name}/{skey}"))
        self._by_key = {f.key: f for f in self._fields}
        self.variables = [f.var for f in self._fields]
        self._batched = _args.env_switch("DDSTORE_BATCH_GET", True)
        dev = None if device is None else torch.device(device)
        self._device = dev if dev is not None and dev.type != "cpu" else None

    # -- helpers ------------------------------------------------------------

    def _rebuild(self, values):
        s = self._structure
        if s == "single":
            return values[0]
        if s == "dict":
            return {f.skey: v for f, v in zip(self._fields, values)}
        if s == "tuple":
            return tuple(values)
        return list(values)

    def _select(self, fields):
        if fields is None:
            return self._fields
        if isinstance(fields, (str, int)):
            fields = [fields]
        sel = []
        for k in fields:
            f = self._by_key.get(k)
            if f is None:
                raise KeyError(f"{self.name}: no field {k!r}; the fields are {list(self._by_key)!r}")
            sel.append(f)
        return sel

    def _buffer(self, f, n):
        if self._device is not None and f.kind == "torch":
            return torch.empty((n, f.width), dtype=f.tdtype, device=self._device)
        return np.empty((n, f.width), f.dtype)

    def _fail_collective(self, exc):
        """After local error `exc` that precedes a method-0 batched read: takes
        part in that collective as a failing rank (dds_fail_collective), so the
        other ranks' read fails too, naming this rank and `exc`, instead of
        waiting for this rank."""
        store = self.ddstore
        if store is None or getattr(store, "batch_mode", "onesided") != "collective" or not self._fields:
            return
        from ._lib import DDS_CALL_GET_BATCH
        try:
            store._fail_collective(DDS_CALL_GET_BATCH, self._fields[0].var, exc)
        except Exception:
            pass

    def _read(self, idx, fields, out):
        """One get_batch per field of global rows idx; returns the (n, width) buffers."""
        bufs = self._buffers(idx, fields, out)
        for f, b in zip(fields, bufs):
            self.ddstore.get_batch(f.var, b, idx)
        return bufs

    def _start(self, idx, fields, out, build):
        """The reads of _read, started (get_batch_async): a _PendingBatch
        whose result() is build(bufs) once every field's rows are in."""
        bufs = self._buffers(idx, fields, out)
        reqs = []
        try:
            for f, b in zip(fields, bufs):
                reqs.append(self.ddstore.get_batch_async(f.var, b, idx))
        except BaseException:
            _PendingBatch(reqs, None).drain()
            raise
        return _PendingBatch(reqs, lambda: build(bufs))

    def _buffers(self, idx, fields, out):
        """The (n, width) destination of each field: fresh, or views of `out`."""
        n = len(idx)
        try:
            bufs = []
            for f in fields:
                if out is None:
                    bufs.append(self._buffer(f, n))
                    continue
                b = out[f.key]
                shape = tuple(b.shape)
                if len(shape) != 2 or shape[0] < n or shape[1] != f.width:
                    raise ValueError(f"{self.name}: out[{f.key!r}] has shape {shape}, need at least "
                                     f"({n}, {f.width}) (use alloc())")
                bufs.append(b[:n])
        except Exception as exc:
            self._fail_collective(exc)
            raise
        return bufs

    def _indices(self, rows):
        """Global row numbers as int64, checked as PyDDStore.get_batch checks
        them (no silent wrap of floats or huge values); a refusal fails the
        method-0 collective on every rank."""
        try:
            if isinstance(rows, torch.Tensor):
                rows = rows.detach().cpu().numpy()
            if isinstance(rows, np.ndarray):
                rows = rows.reshape(-1)
            return _args.indices(rows)
        except Exception as exc:
            self._fail_collective(exc)
            raise

    # -- the reading API ----------------------------------------------------

    def __len__(self):
        return self.total_ns

    def len(self):
        """Total number of samples."""
        return self.total_ns

    @property
    def shapes(self):
        """Per-field shapes, arranged like a sample."""
        return self._rebuild([f.shape for f in self._fields])

    @property
    def dtypes(self):
        """Per-field dtype names (structured dtypes for records), arranged like a sample."""
        return self._rebuild([f.info_dtype() for f in self._fields])

    def get(self, i):
        """Sample i: one ``get`` of one row per field (not collective)."""
        i = int(i)
        values = []
        for f in self._fields:
            buf = self._buffer(f, 1)
            self.ddstore.get(f.var, buf, i)
            values.append(f.one(buf[0]))
        sample = self._rebuild(values)
        if self.decode is not None:
            sample = self.decode(sample, i)
        return sample

    def __getitem__(self, i):
        return self.get(i)

    def __getitems__(self, indices, out=None):
        """The samples at `indices`: one ``get_batch`` per field (collective
        with method 0). Results are views of fresh buffers, or of `out`."""
        if out is None and not self._batched:
            return [self.get(i) for i in indices]
        idx = self._indices(indices)
        return self._samples(idx, self._read(idx, self._fields, out))

    def _start_getitems(self, indices, out=None):
        """__getitems__(indices, out) with its reads started and still in
        flight: a _PendingBatch whose result() is the list of samples. None
        when this dataset reads sample by sample (DDSTORE_BATCH_GET=0)."""
        if out is None and not self._batched:
            return None
        idx = self._indices(indices)
        return self._start(idx, self._fields, out, lambda bufs: self._samples(idx, bufs))

    def _samples(self, idx, bufs):
        fields, decode, rebuild = self._fields, self.decode, self._rebuild
        samples = []
        for k in range(len(idx)):
            sample = rebuild([f.one(b[k]) for f, b in zip(fields, bufs)])
            if decode is not None:
                sample = decode(sample, int(idx[k]))
            samples.append(sample)
        return samples

    def read_rows(self, rows, fields=None, out=None):
        """{key: column} of the stored rows (no decode), each column shaped
        (len(rows), *field_shape). Collective with method 0."""
        idx = self._indices(rows)
        try:
            sel = self._select(fields)
        except KeyError as exc:
            self._fail_collective(exc)
            raise
        bufs = self._read(idx, sel, out)
        n = len(idx)
        return {f.key: f.column(b, n) for f, b in zip(sel, bufs)}

    def _start_read_rows(self, rows, fields=None):
        """read_rows with its reads in flight: a _PendingBatch of the columns."""
        idx = self._indices(rows)
        try:
            sel = self._select(fields)
        except KeyError as exc:
            self._fail_collective(exc)
            raise
        n = len(idx)
        return self._start(idx, sel, None, lambda bufs: {f.key: f.column(b, n) for f, b in zip(sel, bufs)})

    def alloc(self, n, fields=None):
        """{key: buffer} for n rows of each selected field, registered for reads."""
        out = {}
        for f in self._select(fields):
            buf = self._buffer(f, int(n))
            self.ddstore.register_recv(f.var, buf)
            out[f.key] = buf
        return out

    def release(self, bufs):
        """Unregisters buffers from alloc()."""
        for key, buf in bufs.items():
            f = self._by_key.get(key)
            if f is None:
                raise KeyError(f"{self.name}: no field {key!r}; the fields are {list(self._by_key)!r}")
            self.ddstore.unregister_recv(f.var, buf)


# ---------------------------------------------------------------------------

class DistDataset(_StoredDataset):
    """The samples of `source` spread over the ranks of `comm` (collective).

    DistDataset(source, name, comm=None, ddstore_width=None, device=None,
                add_device=None, method=None, handshake_dir=None,
                chunk_size=None, encode=None, decode=None, fields=None,
                batch_mode=None, prefetch=2)

    ``prefetch``: batches whose reads a ThreadDataLoader over this dataset
    keeps in flight ahead of the one in use (its own ``prefetch=`` wins; 0
    reads each batch when its turn comes). See docs/pytorch.md.

    ``batch_mode`` (method 0): None (default) means ``"onesided"`` unless
    DDSTORE_BATCH_MODE is set: samplers, uneven last batches and loader
    threads read on each rank independently, which one-sided batches allow
    (so ThreadDataLoader may use several threads). ``"collective"`` keeps
    DDStore 3.0's collective batches (every rank reads the same number of
    batches, from one thread).

    Every rank stores a contiguous, balanced share of ``len(source)`` samples,
    one store variable ``"{name}/{key}"`` per sample field; any rank reads any
    sample. See docs/pytorch.md.
    """

    def __init__(self, source, name, comm=None, ddstore_width=None, device=None,
                 add_device=None, method=None, handshake_dir=None, chunk_size=None,
                 encode=None, decode=None, fields=None, batch_mode=None, prefetch=2):
        self.ddstore = None
        self.prefetch = _prefetch_arg(prefetch)
        if batch_mode is None and not os.environ.get("DDSTORE_BATCH_MODE", "").strip():
            batch_mode = "onesided"
        self.batch_mode = batch_mode
        if fields is not None and encode is not None:
            raise ValueError("pass either fields or encode, not both")
        if fields is not None:
            encode = _fields_encoder(fields)
        if encode is not None:
            source = _Encoded(source, encode)
        self.decode = decode

        from mpi4py import MPI  # here, not at import: torch is loaded first
        import pyddstore

        if comm is None:
            comm = MPI.COMM_WORLD
        self.comm = comm
        self.rank = comm.Get_rank()
        self.comm_size = comm.Get_size()
        self.add_device = add_device
        self.ddstore_width = self.comm_size if ddstore_width is None else operator.index(ddstore_width)
        if self.ddstore_width < 1:
            raise ValueError(f"ddstore_width must be at least 1, got {self.ddstore_width}")
        self.method = _args.env_int("DDSTORE_METHOD", 0, 0, 2) if method is None else operator.index(method)
        if self.method == 2 and self.ddstore_width != self.comm_size:
            raise NotImplementedError("method=2 needs ddstore_width equal to the communicator size "
                                      "(groups would collide in one handshake directory)")

        self.ddstore_comm = comm.Split(color=self.rank // self.ddstore_width, key=self.rank)
        try:
            self._build(source, name, device, add_device, handshake_dir, chunk_size, pyddstore)
        except Exception:
            # Every error from here on is raised on every rank (agreed, or
            # agreed by the library's collectives): release together.
            store, self.ddstore = self.ddstore, None
            try:
                if store is not None:
                    store.free()
                self.ddstore_comm.Free()
            except Exception:
                pass
            raise

    def _build(self, source, name, device, add_device, handshake_dir, chunk_size, pyddstore):
        comm = self.comm
        grank, gsize = self.ddstore_comm.Get_rank(), self.ddstore_comm.Get_size()
        total_ns = len(source)
        lo, hi = _share(total_ns, gsize, grank)
        self._lo, self._hi = lo, hi

        first = schema = err = None
        if hi > lo:
            try:
                first = source[lo]
                schema = _schema_of(first)
            except Exception as e:  # agreed on every rank below
                err = e
        schemas = _agree(comm, schema, err)
        if any(s is None for s in schemas):
            raise ValueError(f"{name}: every rank needs at least one sample (dataset has {total_ns})")
        if any(s != schemas[0] for s in schemas):
            raise ValueError(f"{name}: samples differ in structure, shape or dtype across ranks")
        schema = schemas[0]
        self._setup_reading(schema, name, device, total_ns)

        on_device = add_device is not None and torch.device(add_device).type != "cpu"
        if chunk_size is not None:
            chunk_size = operator.index(chunk_size)
            if chunk_size < 1:
                raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
            if add_device is not None and any(f.kind == "torch" for f in self._fields):
                raise ValueError("chunk_size needs host storage: it cannot be combined with add_device "
                                 "when samples hold torch tensors")
        self.chunk_size = chunk_size

        if self.method == 2:
            hs = self.handshake_dir = _handshake_dir(handshake_dir)
            self.ddstore = pyddstore.PyDDStore(self.ddstore_comm, method=2, handshake_dir=hs)
            # The schema goes first: a reader that finds a variable finds it.
            err = None
            if grank == 0:
                try:
                    self._publish_meta(hs, total_ns)
                except Exception as e:
                    err = e
            _agree(comm, None, err)
        else:
            self.handshake_dir = None
            self.ddstore = pyddstore.PyDDStore(self.ddstore_comm, method=self.method,
                                               batch_mode=self.batch_mode if self.method == 0 else None)
        if chunk_size is None:
            self._load_whole(source, first, on_device)
        else:
            self._load_chunked(source, first, chunk_size)
        logger.debug("%s: rank %d of group %d holds samples [%d, %d) of %d",
                     name, grank, self.rank // self.ddstore_width, lo, hi, total_ns)

    # -- loading --------------------------------------------------------------

    def _publish_meta(self, hs, total_ns):
        os.makedirs(hs, exist_ok=True)
        path = os.path.join(hs, _safe_name(self.name) + ".meta.json")
        tmp = f"{path}.tmp.{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"total_ns": total_ns, **self.schema}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _sample(self, source, i, first):
        """Leaves of source[i], checked against the agreed schema."""
        sample = first if i == self._lo and first is not None else source[i]
        schema, leaves = _schema_and_leaves(sample)
        if schema != self.schema:
            raise ValueError(f"{self.name}[{i}]: structure, shape or dtype differs from "
                             f"{self.name}[{self._lo}] ({schema} vs {self.schema}); "
                             "DistDataset needs fixed-shape samples")
        return leaves

    def _load_whole(self, source, first, on_device):
        lo, hi = self._lo, self._hi
        n = hi - lo
        fields = self._fields
        dev = [on_device and f.kind == "torch" for f in fields]
        err = None
        host = [None if d else np.empty((n, f.width), f.dtype) for f, d in zip(fields, dev)]
        tens = [[] if d else None for d in dev]
        try:
            for j in range(n):
                leaves = self._sample(source, lo + j, first)
                for f, v, h, t in zip(fields, leaves, host, tens):
                    if h is not None:
                        h[j] = f.row(v)
                    else:
                        t.append(v.detach().reshape(-1))
        except Exception as e:
            err = e
        _agree(self.comm, None, err)
        store = self.ddstore
        for f, h, t in zip(fields, host, tens):
            if h is not None:
                store.add(f.var, h)
            else:
                # A device source: the library copies it into the host shard.
                store.add(f.var, torch.stack(t).to(self.add_device).contiguous())

    def _load_chunked(self, source, first, chunk):
        lo, hi = self._lo, self._hi
        store, fields = self.ddstore, self._fields
        for f in fields:
            store.init(f.var, hi - lo, f.width, f.dtype.itemsize)
        err = None
        try:
            for c0 in range(lo, hi, chunk):
                c1 = min(hi, c0 + chunk)
                bufs = [np.empty((c1 - c0, f.width), f.dtype) for f in fields]
                for j in range(c1 - c0):
                    leaves = self._sample(source, c0 + j, first)
                    for f, v, b in zip(fields, leaves, bufs):
                        b[j] = f.row(v)
                first = None  # the first sample is not kept past the first chunk
                for f, b in zip(fields, bufs):
                    store.update(f.var, b, c0 - lo)
                del bufs
        except Exception as e:
            err = e
        # Also makes every rank wait until all shares are filled.
        _agree(self.comm, None, err)


class DistDatasetReader(_StoredDataset):
    """A separate job's view of a dataset published by a ``DistDataset`` with
    ``method=2`` (a method-2 extra member; reads are one-sided).

    DistDatasetReader(name, handshake_dir=None, n_core=None, device=None, decode=None, prefetch=2)
    """

    def __init__(self, name, handshake_dir=None, n_core=None, device=None, decode=None, prefetch=2):
        self.ddstore = None
        self.prefetch = _prefetch_arg(prefetch)
        self.decode = decode
        hs = _handshake_dir(handshake_dir)
        self.handshake_dir = hs
        if n_core is None:
            env = os.environ.get("DDSTORE_N_CORE", "")
            if not env:
                raise ValueError(f"DistDatasetReader('{name}') needs the number of core ranks: "
                                 "pass n_core= or set DDSTORE_N_CORE")
            n_core = _args.env_int("DDSTORE_N_CORE", 0, 1, (1 << 31) - 1)
        self.n_core = operator.index(n_core)
        timeout = _args.env_seconds("DDSTORE_HANDSHAKE_TIMEOUT_S", 300.0)
        path = os.path.join(hs, _safe_name(name) + ".meta.json")
        t0 = time.monotonic()
        while not os.path.exists(path):
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"no dataset '{name}' published in {hs} after {timeout:g} s")
            time.sleep(_POLL_S)
        with open(path, encoding="utf-8") as fh:
            meta = json.load(fh)
        total_ns = meta.pop("total_ns")
        self._setup_reading(meta, name, device, total_ns)

        import pyddstore

        store = pyddstore.PyDDStore(None, method=2, handshake_dir=hs, n_core=self.n_core)
        try:
            for f in self._fields:
                store.join(f.var)
        except BaseException:
            store.free()
            raise
        self.ddstore = store


# ---------------------------------------------------------------------------

class WindowedDataset(Dataset):
    """Samples made of several stored rows of a DistDataset/DistDatasetReader.

    WindowedDataset(ds, window, stride=1, dilation=1, starts=None, fields=None, prefetch=None)

    ``prefetch`` (None: ``ds.prefetch``) as for DistDataset.

    Window i covers rows start_i + k * dilation for k < window, with
    start_i = i * stride, or ``starts[i]``. Each field comes back stacked,
    shaped (window, *field_shape); ``decode`` is not applied.
    """

    def __init__(self, ds, window, stride=1, dilation=1, starts=None, fields=None, prefetch=None):
        self.prefetch = _prefetch_arg(getattr(ds, "prefetch", 2) if prefetch is None else prefetch)
        window, stride, dilation = (operator.index(v) for v in (window, stride, dilation))
        for what, v in (("window", window), ("stride", stride), ("dilation", dilation)):
            if v < 1:
                raise ValueError(f"{what} must be at least 1, got {v}")
        self.ds = ds
        self.window, self.stride, self.dilation = window, stride, dilation
        self.offsets = np.arange(window, dtype=np.int64) * dilation
        span = int(self.offsets[-1]) + 1
        n = len(ds)
        if starts is not None:
            st = np.ascontiguousarray(np.asarray(starts, dtype=np.int64).reshape(-1))
            bad = (st < 0) | (st + span > n)
            if bad.any():
                raise IndexError(f"window start {int(st[bad][0])} is out of range: a window spans "
                                 f"{span} rows and the dataset has {n}")
        else:
            count = (n - span) // stride + 1 if n >= span else 0
            st = np.arange(count, dtype=np.int64) * stride
        self.starts = st
        self.fields = None if fields is None else list(
            [fields] if isinstance(fields, (str, int)) else fields)
        self._keys = [f.key for f in ds._select(self.fields)]

    def __len__(self):
        return len(self.starts)

    def _fail(self, exc):
        fail = getattr(self.ds, "_fail_collective", None)
        if fail is not None:
            fail(exc)
        raise exc

    def _normalise(self, i):
        n = len(self.starts)
        try:
            i = operator.index(i)
        except TypeError as e:
            self._fail(e)
        if not -n <= i < n:
            self._fail(IndexError(f"window {i} is out of range for {n} windows"))
        return i + n if i < 0 else i

    def _windows(self, which, cols=None):
        if cols is None:
            rows = (self.starts[which][:, None] + self.offsets).reshape(-1)
            cols = self.ds.read_rows(rows, fields=self._keys)
        w = self.window
        out = []
        for k in range(len(which)):
            parts = {key: col[k * w:(k + 1) * w] for key, col in cols.items()}
            if self.fields is not None:
                out.append(parts)
            else:
                out.append(self.ds._rebuild([parts[key] for key in self._keys]))
        return out

    def __getitem__(self, i):
        return self._windows(np.array([self._normalise(i)], dtype=np.int64))[0]

    def __getitems__(self, indices):
        which = np.array([self._normalise(i) for i in indices], dtype=np.int64)
        return self._windows(which)

    def _start_getitems(self, indices, out=None):
        """__getitems__ with the rows' reads in flight (see _StoredDataset)."""
        start = getattr(self.ds, "_start_read_rows", None)
        if start is None or out is not None:
            return None
        which = np.array([self._normalise(i) for i in indices], dtype=np.int64)
        rows = (self.starts[which][:, None] + self.offsets).reshape(-1)
        pending = start(rows, fields=self._keys)
        build = pending._build
        pending._build = lambda: self._windows(which, build())
        return pending


def row_of(concat, source, index):
    """The global row of sample `index` of sub-dataset `source` of the
    ``ConcatDataset`` `concat`: its index in a DistDataset built over `concat`."""
    sizes = [len(d) for d in concat.datasets]
    source, index = operator.index(source), operator.index(index)
    if not 0 <= source < len(sizes):
        raise IndexError(f"source {source} is out of range [0, {len(sizes)})")
    if not 0 <= index < sizes[source]:
        raise IndexError(f"index {index} is out of range [0, {sizes[source]}) of source {source}")
    return sum(sizes[:source]) + index


# ---------------------------------------------------------------------------
# ThreadDataLoader

class _AffinityPlan:
    """CPU pinning of loader threads: thread k (in start order) is restricted
    to entries [offset + k*width, offset + (k+1)*width) of the affinity list
    the process had when the loader was made."""

    def __init__(self):
        self.width = int(os.environ.get("DDSTORE_AFFINITY_WIDTH", "0") or 0)
        self.offset = int(os.environ.get("DDSTORE_AFFINITY_OFFSET", "0") or 0)
        self.cpus = None
        if self.width > 0 and hasattr(os, "sched_getaffinity"):
            self.cpus = sorted(os.sched_getaffinity(0))
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self):  # the thread pool's initializer
        with self._lock:
            k = self._next
            self._next += 1
        if not self.cpus or not hasattr(os, "sched_setaffinity"):
            return
        mine = self.cpus[self.offset + k * self.width:self.offset + (k + 1) * self.width]
        if mine:
            try:
                os.sched_setaffinity(0, mine)  # 0: the calling thread (Linux)
            except OSError as e:
                logger.debug("loader thread %d: cannot pin to %s: %s", k, mine, e)


_END = object()


class _ThreadLoaderIter:
    """One epoch of a ThreadDataLoader: fetches run ahead in the loader's
    threads, and batches come back in sampler order."""

    def __init__(self, loader):
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        # The draw DataLoader's iterator makes for its workers' base seed:
        # the training loop's later random numbers stay the same.
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
        pf = 2 if loader.prefetch_factor is None else loader.prefetch_factor
        self._bound = max(1, (loader.num_workers or 1) * pf)
        # prefetch: the reads of the next k batches are started here, in
        # sampler order, from this (one) thread; the loader's threads wait
        # for them and collate. Datasets without started reads take the
        # threads' fetches instead.
        self._reads_ahead = loader.prefetch > 0 and loader._auto_collation and \
            callable(getattr(loader.dataset, "_start_getitems", None))
        if self._reads_ahead:
            self._bound = loader.prefetch
        self._pending = collections.deque()
        self._in_flight = 0
        self._ended = False
        self._closed = False
        self._refill()

    def _refill(self):
        while not self._ended and self._in_flight < self._bound:
            try:
                index = next(self._sampler_iter)
            except StopIteration:
                self._ended = True
                self._pending.append(_END)
                break
            loader = self._loader
            self._pending.append(loader._start(index) if self._reads_ahead else loader._submit(index))
            self._in_flight += 1

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        if self._closed or not self._pending or self._pending[0] is _END:
            raise StopIteration
        fut = self._pending.popleft()
        self._in_flight -= 1
        data = fut.result()
        self._refill()
        return data

    def close(self):
        """Cancels the fetches not yet started; running ones finish in the
        background. Reads already started (prefetch) are waited for: their
        buffers are written until then, and a method-0 collective read must
        complete on every rank."""
        self._closed = True
        pending, self._pending = self._pending, collections.deque()
        for fut in pending:
            if fut is not _END and fut.cancel():
                started = getattr(fut, "ddstore_reads", None)
                if started is not None:
                    self._loader._abandon(*started)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class ThreadDataLoader(DataLoader):
    """A DataLoader whose workers are threads of this process.

    ThreadDataLoader(dataset, reuse_buffers=False, collate_copies=False, **DataLoader_kwargs)

    ``num_workers`` is the number of threads (0 means 1). Batches come back in
    sampler order. ``prefetch=k`` (None: the dataset's ``prefetch``, default
    2) keeps the reads of the next k batches in flight (non-blocking batched
    reads, started in sampler order) while the current batch is used; with
    ``prefetch=0``, or a dataset without started reads,
    ``num_workers * prefetch_factor`` batches are fetched ahead by the threads.
    With ``reuse_buffers=True`` each thread reads into a set of buffers from
    ``dataset.alloc(batch_size)`` that is reused batch after batch (the
    collate must copy: torch's default_collate does). See docs/pytorch.md.
    """

    def __init__(self, dataset, reuse_buffers=False, collate_copies=False, prefetch=None, **kwargs):
        self._executor = None
        self._buffer_sets = []
        self._free_sets = None
        self._live = weakref.WeakSet()
        super().__init__(dataset, **kwargs)
        self.prefetch = _prefetch_arg(getattr(dataset, "prefetch", 2) if prefetch is None else prefetch)
        if isinstance(dataset, IterableDataset):
            raise TypeError("ThreadDataLoader needs a map-style dataset (with __getitem__), "
                            "not an IterableDataset")
        self.reuse_buffers = bool(reuse_buffers)
        self.collate_copies = bool(collate_copies)
        threads = self.num_workers or 1
        store = getattr(dataset, "ddstore", None)
        if threads > 1 and getattr(store, "method", None) == 0 and \
                getattr(store, "batch_mode", "collective") == "collective":
            raise InvalidArgumentError(
                f"ThreadDataLoader: num_workers={self.num_workers} over a method-0 dataset in the collective "
                "batch mode: its batched reads are collective (one calling thread per rank); use the "
                "one-sided mode (DistDataset's default, batch_mode='onesided'), num_workers=1 (or 0), "
                "or method 1")
        if self.reuse_buffers:
            if not callable(getattr(dataset, "alloc", None)):
                raise TypeError("reuse_buffers needs a dataset with alloc() and __getitems__(indices, out=) "
                                f"(DistDataset or DistDatasetReader), got {type(dataset).__name__}")
            if self.batch_size is None:
                raise ValueError("reuse_buffers needs batch_size (automatic batching): the buffers "
                                 "hold batch_size rows")
            if self.collate_fn is not default_collate and not self.collate_copies:
                raise ValueError("reuse_buffers reuses the buffers right after collate_fn: pass "
                                 "collate_copies=True to declare that this collate_fn copies the data")
            self._free_sets = queue.SimpleQueue()
            # Each batch whose reads are in flight holds a set too.
            for _ in range(threads + self.prefetch):
                bufs = dataset.alloc(self.batch_size)
                self._buffer_sets.append(bufs)
                self._free_sets.put(bufs)
        accel = getattr(torch, "accelerator", None)
        available = accel.is_available() if accel is not None else torch.cuda.is_available()
        self._pin = bool(self.pin_memory) and available and _pin_memory is not None
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="ddstore-loader", initializer=_AffinityPlan())

    def check_worker_number_rationality(self):
        """DataLoader warns when num_workers exceeds the CPUs, for worker
        processes; loader threads mostly wait for the network: no warning."""

    @property
    def buffer_sets(self):
        """The buffer sets of reuse_buffers (empty otherwise, and after close())."""
        return list(self._buffer_sets)

    def _submit(self, index):
        ex = self._executor
        if ex is None:
            raise RuntimeError("this ThreadDataLoader is closed")
        return ex.submit(self._fetch, index)

    def _start(self, index):
        """Starts the reads of batch `index` (this thread, sampler order) and
        queues their wait and the collate on the loader's threads. An error
        at start comes back from the batch's turn, as a fetch's would."""
        ex = self._executor
        if ex is None:
            raise RuntimeError("this ThreadDataLoader is closed")
        bufs = self._free_sets.get() if self._free_sets is not None else None
        try:
            pending = self.dataset._start_getitems(index, out=bufs)
        except Exception as exc:
            if bufs is not None:
                self._free_sets.put(bufs)
            fut = concurrent.futures.Future()
            fut.set_exception(exc)
            return fut
        if pending is None:  # the dataset reads sample by sample
            if bufs is not None:
                self._free_sets.put(bufs)
            return self._submit(index)
        fut = ex.submit(self._finish, pending, bufs)
        fut.ddstore_reads = (pending, bufs)
        return fut

    def _finish(self, pending, bufs):
        try:
            data = pending.result()
            if self.collate_fn is not None:
                data = self.collate_fn(data)
        finally:
            if bufs is not None:
                self._free_sets.put(bufs)
        if self._pin:
            data = _pin_memory(data)
        return data

    def _abandon(self, pending, bufs):
        """A started batch that will not be used: wait for its reads, free its set."""
        pending.drain()
        if bufs is not None:
            self._free_sets.put(bufs)

    def _fetch(self, index):
        dataset, collate = self.dataset, self.collate_fn
        if self._free_sets is not None:
            bufs = self._free_sets.get()
            try:
                data = dataset.__getitems__(index, out=bufs)
                if collate is not None:
                    data = collate(data)
            finally:
                self._free_sets.put(bufs)
        else:
            if not self._auto_collation:
                data = dataset[index]
            else:
                getitems = getattr(dataset, "__getitems__", None)
                data = getitems(index) if getitems else [dataset[i] for i in index]
            if collate is not None:
                data = collate(data)
        if self._pin:
            data = _pin_memory(data)
        return data

    def __iter__(self):
        if self._executor is None:
            raise RuntimeError("this ThreadDataLoader is closed")
        # Iterators may interleave (as DataLoader's); one dropped (a break, a
        # new epoch's loop) drains its reads ahead when collected, and
        # close() drains every live one.
        it = _ThreadLoaderIter(self)
        self._live.add(it)
        return it

    def close(self):
        """Stops the threads (queued fetches are cancelled, reads in flight
        drained) and releases the buffer sets."""
        for it in list(self._live):
            it.close()
        ex, self._executor = self._executor, None
        if ex is not None:
            try:
                ex.shutdown(wait=self._free_sets is not None, cancel_futures=True)
            except TypeError:  # Python 3.8: no cancel_futures; queued fetches still run
                ex.shutdown(wait=self._free_sets is not None)
        sets, self._buffer_sets = self._buffer_sets, []
        for bufs in sets:
            try:
                self.dataset.release(bufs)
            except (ValueError, KeyError, RuntimeError):  # e.g. the store was freed
                pass

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# Datasets of samples with ragged fields (graphs): their own module.
from .torch_ragged import RaggedDataset  # noqa: E402

__all__.append("RaggedDataset")
