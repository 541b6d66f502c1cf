"""Ragged variables: samples of different lengths (docs/ragged.md).

A sample is an array whose first axis is its length (0 allowed) and whose
trailing axes (the row shape) and dtype are the same for every sample of
the variable. The store keeps each rank's samples on that rank, with their
offsets; these functions are the bodies of PyDDStore's ``*_ragged``
methods and take the store as their first argument.

Collective exactly when the C calls are: ``add_ragged`` always; reads in
method 0's collective batch mode (every rank calls, the same number of
times). A failure found here before a collective C call is contributed to
that call with ``dds_fail_collective``, so every rank raises together.
"""

import numpy as np

from . import _args, _lib
from ._buffers import extract
from ._errors import ArgumentTypeError, InvalidArgumentError, MismatchError, UnsupportedDtypeError

_ffi = _lib.ffi
_NULL = _lib.NULL


def split(flat, lengths):
    """Views of `flat`, one per sample: sample i is the next lengths[i] rows."""
    lengths = np.asarray(lengths, np.int64)
    if lengths.ndim != 1 or (lengths < 0).any() or int(lengths.sum()) != len(flat):
        raise InvalidArgumentError(
            f"lengths must be non-negative and sum to the {len(flat)} rows of flat "
            f"(they sum to {int(lengths.sum()) if lengths.ndim == 1 else 'n/a'})")
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []


def _samples(data, lengths, dtype, row_shape):
    """(flat C-contiguous array, int64 lengths) from either form of add_ragged."""
    if lengths is None:
        if isinstance(data, np.ndarray):
            raise ArgumentTypeError("add_ragged(name, flat, lengths): lengths is missing "
                                    "(or pass a list of arrays)")
        parts = [np.asarray(a) for a in data]
        for k, a in enumerate(parts):
            if a.ndim == 0:
                raise InvalidArgumentError(f"sample {k} is a scalar; a sample needs a first axis (its rows)")
        if parts:
            dtype = parts[0].dtype if dtype is None else np.dtype(dtype)
            row_shape = parts[0].shape[1:] if row_shape is None else tuple(row_shape)
            for k, a in enumerate(parts):
                if a.shape[1:] != row_shape or a.dtype != dtype:
                    raise MismatchError(
                        f"sample {k} has rows of shape {a.shape[1:]} and dtype {a.dtype}; sample 0 "
                        f"has {row_shape} {dtype}: every sample of a ragged variable has the same row shape")
            flat = np.ascontiguousarray(np.concatenate(parts, axis=0))
        else:
            if dtype is None or row_shape is None:
                raise InvalidArgumentError(
                    "add_ragged with no samples on this rank needs dtype= and row_shape= "
                    "(the other ranks' row shape)")
            flat = np.zeros((0, *row_shape), dtype)
        return flat, np.asarray([a.shape[0] for a in parts], np.int64)
    flat = np.asarray(data) if not isinstance(data, np.ndarray) else data
    if flat.ndim == 0:
        raise InvalidArgumentError("flat must have a first axis (the samples' rows back to back)")
    return np.ascontiguousarray(flat), _args.indices(lengths)


def add_ragged(store, name, data, lengths=None, *, dtype=None, row_shape=None):
    h = store._handle()
    try:
        cname = _args.cname(name)
        flat, lens = _samples(data, lengths, dtype, row_shape)
        ptr, nbytes, itemsize, _rows, row_elems, gpu = extract(flat, "flat")
        if gpu:
            raise UnsupportedDtypeError("add_ragged takes host arrays")
        shape = flat.shape[1:]
    except Exception as exc:
        store._fail_collective(_lib.DDS_CALL_ADD_RAGGED, name, exc)
        raise
    lp = _ffi.from_buffer("int64_t[]", lens)
    store._check(store._lib.dds_add_ragged(h, cname, ptr, nbytes, lp, len(lens), row_elems, itemsize))
    store._ragged[name] = (flat.dtype, shape)


def join_ragged(store, name, dtype=None, row_shape=None):
    store._check(store._lib.dds_join_ragged(store._handle(), _args.cname(name)))
    if dtype is not None:
        store._ragged[name] = (np.dtype(dtype), tuple(row_shape) if row_shape is not None else None)


def _form(store, name, dtype, row_shape):
    """(dtype, row shape) of a ragged variable's rows: given, remembered
    from add_ragged, or unsigned integers of the variable's item size."""
    info = store._info(store._var(name).cname)
    if not info.is_ragged:
        raise InvalidArgumentError(f"variable '{name}' has fixed-size rows, not ragged samples (use get_batch)")
    known = store._ragged.get(name, (None, None))
    dtype = np.dtype(dtype) if dtype is not None else known[0]
    if dtype is None:
        dtype = np.dtype(f"u{info.item_size}")
    row_shape = tuple(row_shape) if row_shape is not None else known[1]
    if row_shape is None:
        row_shape = (info.row_elems,) if info.row_elems > 1 else ()
    if dtype.itemsize != info.item_size or int(np.prod(row_shape, dtype=np.int64)) != info.row_elems:
        raise MismatchError(
            f"ragged variable '{name}' has rows of {info.row_elems} items of {info.item_size} bytes; "
            f"dtype {dtype} with row shape {row_shape} does not match")
    return dtype, row_shape


def _indices(store, name, indices, call):
    try:
        idx = _args.indices(indices)
        store._var(name)
        return idx
    except Exception as exc:
        if store._collective():
            store._fail_collective(call, name, exc)
        raise


def lengths(store, name, indices):
    idx = _indices(store, name, indices, _lib.DDS_CALL_RAGGED_LENGTHS)
    out = np.empty(len(idx), np.int64)
    cname = store._var(name).cname
    store._check(store._lib.dds_ragged_lengths(
        store._handle(), cname, _ffi.from_buffer("int64_t[]", idx), len(idx), _ffi.from_buffer("int64_t[]", out)))
    return out


def get_batch_into(store, name, out, indices, dtype=None, row_shape=None):
    """Reads into `out` (any writable C-contiguous host array with room for
    the samples' bytes); returns (flat view of out, lengths)."""
    try:
        idx = _args.indices(indices)
        var = store._var(name)
        dt, shape = _form(store, name, dtype, row_shape)
        ptr, nbytes, _, _, _, gpu = extract(out, "out", writable=True, check_dtype=False)
        if gpu:
            raise UnsupportedDtypeError("ragged reads need a host destination")
    except Exception as exc:
        if store._collective():
            store._fail_collective(_lib.DDS_CALL_GET_RAGGED_BATCH, name, exc)
        raise
    lens = np.empty(len(idx), np.int64)
    got = _ffi.new("size_t *")
    store._check(store._lib.dds_get_ragged_batch(
        store._handle(), var.cname, ptr, nbytes, _ffi.from_buffer("int64_t[]", idx), len(idx),
        _ffi.from_buffer("int64_t[]", lens), got))
    rows = int(lens.sum())
    flat = out.reshape(-1).view(np.uint8)[:got[0]].view(dt).reshape((rows, *shape))
    return flat, lens


def get_batch(store, name, indices, dtype=None, row_shape=None):
    """(flat, lengths): the samples back to back, and their lengths."""
    try:
        dt, shape = _form(store, name, dtype, row_shape)
        idx = _args.indices(indices)
    except Exception as exc:
        if store._collective():
            store._fail_collective(_lib.DDS_CALL_RAGGED_LENGTHS, name, exc)
        raise
    lens = lengths(store, name, idx)
    out = np.empty((int(lens.sum()), *shape), dt)
    flat, lens2 = get_batch_into(store, name, out, idx, dt, shape)
    return flat, lens2


def get(store, name, i, dtype=None, row_shape=None):
    """Sample i as one array (its rows along the first axis)."""
    flat, _ = get_batch(store, name, [_args.row(i, "i")], dtype, row_shape)
    return flat

