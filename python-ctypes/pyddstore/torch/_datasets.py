"""The stored datasets of pyddstore.torch: DistDataset (publishes a dataset
into a store, one variable per field), DistDatasetReader (reads one that a
separate job published, method 2), and their shared reading side with the
reads kept in flight (prefetch)."""

import json
import logging
import operator
import os

import numpy as np
import torch
from torch.utils.data import Dataset

from .. import _args  # numpy only: the store (_core, _lib) is loaded on first use
from ._schema import (_agree, _Encoded, _Field, _fields_encoder, _handshake_dir, _safe_name, _schema_and_leaves,
                      _schema_of, _share)

logger = logging.getLogger("pyddstore.torch")

# The variable a snapshot keeps a dataset's schema in (DistDataset.save),
# and the hand-shake blob a method-2 group publishes it as.
_SCHEMA_VAR = "__schema__"
_empty, _from_numpy = np.empty, torch.from_numpy


def _schema_blob(name):
    return f"{name}/{_SCHEMA_VAR}"


def _refuse_old_schema(hs, name):
    """A hand-shake directory holding the schema file an older pyddstore
    wrote (`<safe name>.meta.json`; now a library blob) belongs to an older run."""
    from pyddstore import MismatchError
    old = os.path.join(hs, _safe_name(name) + ".meta.json")
    if os.path.exists(old):
        raise MismatchError(
            f"dataset '{name}': hand-shake directory {hs} holds {os.path.basename(old)}, a schema in the format of "
            f"an older pyddstore; schemas are now hand-shake blobs ('{_schema_blob(name)}'), so the publishing "
            "and reading jobs must both use this pyddstore: remove the directory (or use a fresh one) and "
            "start the DistDataset job again")


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


# Field kinds whose samples default_collate stacks into one tensor.
_TENSOR_KINDS = frozenset(("torch", "numpy", "npscalar", "py"))


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
        # default_collate makes one tensor per field of these kinds, which a
        # batch's (n, width) read buffer already is (records stay arrays).
        self._columns_collate = all(f.kind in _TENSOR_KINDS for f in self._fields)
        dev = None if device is None else torch.device(device)
        self._device = dev if dev is not None and dev.type != "cpu" else None
        # The common sample, one tensor or array on the host: get() reads it
        # into a buffer shaped (1, *shape) and returns row 0, with none of the
        # general path's steps (a sample costs about 3 Python-level calls).
        f = self._fields[0] if structure == "single" else None  # a container may have no fields
        plain = (f is not None and self._device is None and f.kind in ("torch", "numpy")
                 and len(f.shape) > 0)  # a 0-d value is no row of a (1, *shape) buffer
        self._plain = (f.var, (1,) + f.shape, f.dtype, f.kind == "torch") if plain else None

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
        if store is None or getattr(store, "batch_mode", "onesided") not in ("collective", "auto") or not self._fields:
            return
        from .._lib import DDS_CALL_GET_BATCH
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

    def _read_args(self, rows, fields):
        """The checked rows and fields of a collective read (read_rows and
        its started form): a refusal of either fails the method-0 collective
        on every rank."""
        idx = self._indices(rows)
        try:
            sel = self._select(fields)
        except KeyError as exc:
            self._fail_collective(exc)
            raise
        return idx, sel

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
        plain = self._plain
        if plain is not None and self.decode is None:
            var, shape, dtype, tensor = plain
            buf = _empty(shape, dtype)
            self.ddstore.get(var, buf, i)
            return _from_numpy(buf[0]) if tensor else buf[0]
        values = []
        get, host = self.ddstore.get, self._device is None
        for f in self._fields:
            # Host buffers made here: this runs once per sample, where a method call shows.
            buf = np.empty((1, f.width), f.dtype) if host else self._buffer(f, 1)
            get(f.var, buf, i)
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

    def _start_getitems(self, indices, out=None, collated=False):
        """__getitems__(indices, out) with its reads started and still in
        flight: a _PendingBatch whose result() is the list of samples (with
        `collated`, the batch _getitems_collated returns). None when this
        dataset reads sample by sample (DDSTORE_BATCH_GET=0)."""
        if out is None and not self._batched:
            return None
        idx = self._indices(indices)
        if collated:
            return self._start(idx, self._fields, out, lambda bufs: self._collated(bufs, out is not None))
        return self._start(idx, self._fields, out, lambda bufs: self._samples(idx, bufs))

    def _collates(self):
        """Whether _getitems_collated(indices) can stand for
        default_collate(__getitems__(indices)): batched reads, no decode, and
        only fields default_collate turns into tensors."""
        return self._batched and self.decode is None and self._columns_collate

    def _getitems_collated(self, indices, out=None):
        """default_collate(__getitems__(indices, out)) made from the read
        buffers themselves: one tensor per field, shaped (n, *shape), with
        no object per sample (ThreadDataLoader's path with the default
        collate; only where _collates())."""
        idx = self._indices(indices)
        return self._collated(self._read(idx, self._fields, out), out is not None)

    def _collated(self, bufs, copy):
        """The batch of `bufs` as default_collate shapes it: the fields'
        tensors as a dict, a list (for tuple and list samples alike) or the
        one tensor. Buffers of `out` are reused by the caller: copied."""
        cols = []
        for f, b in zip(self._fields, bufs):
            c = f.column(b, len(b))
            if isinstance(c, np.ndarray):
                c = torch.from_numpy(c)
            cols.append(c.clone() if copy else c)
        s = self._structure
        if s == "single":
            return cols[0]
        if s == "dict":
            return {f.skey: c for f, c in zip(self._fields, cols)}
        return cols

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
        idx, sel = self._read_args(rows, fields)
        bufs = self._read(idx, sel, out)
        n = len(idx)
        return {f.key: f.column(b, n) for f, b in zip(sel, bufs)}

    def _start_read_rows(self, rows, fields=None):
        """read_rows with its reads in flight: a _PendingBatch of the columns."""
        idx, sel = self._read_args(rows, fields)
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
            self._release_after_failure()
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
                    _refuse_old_schema(hs, name)
                    meta = json.dumps({"total_ns": total_ns, **self.schema}).encode("utf-8")
                    self.ddstore.publish_blob(_schema_blob(name), meta)
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

    # -- snapshots (docs/snapshots.md) ----------------------------------------

    def save(self, dir):
        """Saves the dataset's variables and its schema (a small variable
        ``"{name}/__schema__"``) to snapshot directory `dir` (collective), so
        a restarted job rebuilds it with :meth:`from_snapshot`, without the
        source, on any number of ranks."""
        if self.ddstore_width != self.comm_size:
            raise NotImplementedError("save needs ddstore_width equal to the communicator size "
                                      "(every group holds a whole copy)")
        var = f"{self.name}/{_SCHEMA_VAR}"
        if not getattr(self, "_schema_stored", False):
            # One row (on the group's rank 0) of the JSON's bytes, so a
            # loader on any number of ranks reads it with one get.
            meta = json.dumps({"total_ns": self.total_ns, **self.schema}).encode("utf-8")
            width = self.ddstore_comm.bcast(len(meta), root=0)
            rows = 1 if self.ddstore_comm.Get_rank() == 0 else 0
            self.ddstore.add(var, np.frombuffer(meta, np.uint8)[:rows * width].reshape(rows, width))
            self._schema_stored = True
        self.ddstore.save(dir, self.variables + [var])

    @classmethod
    def from_snapshot(cls, dir, name, comm=None, ddstore_width=None, device=None, method=None,
                      batch_mode=None, decode=None, prefetch=2):
        """The dataset `name` saved by :meth:`save` in `dir`, loaded over the
        ranks of `comm` (collective; any number of ranks, each holding an
        even contiguous share of the samples). Methods 0 and 1."""
        from mpi4py import MPI
        import pyddstore

        self = cls.__new__(cls)
        self.ddstore = None
        self.prefetch = _prefetch_arg(prefetch)
        if batch_mode is None and not os.environ.get("DDSTORE_BATCH_MODE", "").strip():
            batch_mode = "onesided"
        self.batch_mode = batch_mode
        self.decode = decode
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank, self.comm_size = self.comm.Get_rank(), self.comm.Get_size()
        self.add_device = None
        self.ddstore_width = self.comm_size if ddstore_width is None else operator.index(ddstore_width)
        if self.ddstore_width < 1:
            raise ValueError(f"ddstore_width must be at least 1, got {self.ddstore_width}")
        self.method = _args.env_int("DDSTORE_METHOD", 0, 0, 2) if method is None else operator.index(method)
        if self.method == 2:
            raise NotImplementedError("from_snapshot builds method 0 or 1 stores")
        self.chunk_size = self.handshake_dir = None
        self.ddstore_comm = self.comm.Split(color=self.rank // self.ddstore_width, key=self.rank)
        try:
            store = self.ddstore = pyddstore.PyDDStore(self.ddstore_comm, method=self.method,
                                                       batch_mode=batch_mode if self.method == 0 else None)
            var = f"{name}/{_SCHEMA_VAR}"
            store.load(dir, [var])
            self._schema_stored = True
            meta = np.empty((1, store.info(var)[1]), np.uint8)
            store.get(var, meta, 0)
            meta = json.loads(meta.tobytes().decode("utf-8"))
            total_ns = meta.pop("total_ns")
            self._setup_reading(meta, name, device, total_ns)
            store.load(dir, self.variables)
            self._lo, self._hi = _share(total_ns, self.ddstore_comm.Get_size(), self.ddstore_comm.Get_rank())
        except Exception:
            self._release_after_failure()
            raise
        return self

    def _release_after_failure(self):
        """Frees the store and the store's communicator after a failed
        build or load (raised on every rank alike); errors while freeing
        are dropped so the original one propagates."""
        store, self.ddstore = self.ddstore, None
        try:
            if store is not None:
                store.free()
            self.ddstore_comm.Free()
        except Exception:
            pass

    # -- loading --------------------------------------------------------------

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
        _refuse_old_schema(hs, name)

        import pyddstore

        store = pyddstore.PyDDStore(None, method=2, handshake_dir=hs, n_core=self.n_core)
        try:
            # Waits as dds_join does (DDSTORE_HANDSHAKE_TIMEOUT_S), with the
            # library's checks on the file.
            meta = json.loads(store.wait_blob(_schema_blob(name)).decode("utf-8"))
            total_ns = meta.pop("total_ns")
            self._setup_reading(meta, name, device, total_ns)
            for f in self._fields:
                store.join(f.var)
        except BaseException:
            store.free()
            raise
        self.ddstore = store
