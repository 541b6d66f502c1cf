"""A PyTorch dataset of dict samples whose fields may be ragged (graphs,
meshes): one store variable per field, ragged or fixed (docs/ragged.md).

    ds = RaggedDataset(local_graphs, "train", comm)   # collective, one call
    g = ds[17]                                        # dict of tensors
    batch = ds.get_batch([3, 17, 17, 2])              # list of dicts

Each rank passes its own samples (a list of dicts, possibly empty); samples
are numbered in rank order. A field whose shape differs between samples in
exactly one axis is ragged along that axis (``x [n, f]``, ``pos [n, 3]``:
axis 0; ``edge_index [2, e]``: axis 1), stored as a ragged variable whose
rows are the other axes; a field of one shape everywhere (a scalar target
``y``) is a fixed-row variable. ``ragged={"field": axis}`` forces the
choice (e.g. when every local sample happens to have the same size).

With torch_geometric installed, ``as_data=True`` returns
``torch_geometric.data.Data`` objects; without it that option raises
ImportError (the rest works without it).

The store defaults to method 0 with one-sided batches, so ranks read
independently (a DataLoader's sampler gives each rank its own batches).
"""

import numpy as np
import torch
from torch.utils.data import Dataset

from .._errors import InvalidArgumentError, MismatchError

__all__ = ["RaggedDataset"]


def _np(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _local_spec(samples, forced):
    """{key: (dtype str, shape with None on the ragged axis)} of this rank's samples."""
    spec = {}
    if not samples:
        return None
    keys = list(samples[0])
    for k, s in enumerate(samples):
        if list(s) != keys:
            raise InvalidArgumentError(f"sample {k} has fields {list(s)}; sample 0 has {keys}")
    for key in keys:
        arrs = [_np(s[key]) for s in samples]
        dt, nd = arrs[0].dtype, arrs[0].ndim
        for k, a in enumerate(arrs):
            if a.dtype != dt or a.ndim != nd:
                raise MismatchError(f"field '{key}' of sample {k} is {a.dtype} with {a.ndim} axes; "
                                    f"sample 0's is {dt} with {nd}")
        varying = [ax for ax in range(nd) if len({a.shape[ax] for a in arrs}) > 1]
        axis = forced.get(key, varying[0] if len(varying) == 1 else None)
        if len(varying) > 1 or (axis is not None and any(ax != axis for ax in varying)):
            raise MismatchError(f"field '{key}' varies in axes {varying}; a ragged field varies in one axis")
        shape = [None if ax == axis else arrs[0].shape[ax] for ax in range(nd)]
        spec[key] = (dt.str, shape)
    return spec


def _merge(specs, forced):
    """One schema from every rank's: a fixed axis whose size differs across
    ranks becomes the ragged axis (if the field has none yet)."""
    mine = [s for s in specs if s is not None]
    if not mine:
        raise InvalidArgumentError("no rank has any sample: the dataset's fields are unknown")
    keys = list(mine[0])
    out = {}
    for s in mine:
        if list(s) != keys:
            raise InvalidArgumentError(f"ranks hold samples with different fields ({list(s)} and {keys})")
    for key in keys:
        dts = {s[key][0] for s in mine}
        if len(dts) > 1:
            raise MismatchError(f"field '{key}' has dtypes {sorted(dts)} on different ranks")
        shapes = [s[key][1] for s in mine]
        nd = len(shapes[0])
        if any(len(sh) != nd for sh in shapes):
            raise MismatchError(f"field '{key}' has different numbers of axes on different ranks")
        axis = forced.get(key)
        for ax in range(nd):
            sizes = {sh[ax] for sh in shapes}
            if None in sizes or len(sizes) > 1:
                if axis is not None and axis != ax:
                    raise MismatchError(f"field '{key}' varies in axes {axis} and {ax}")
                axis = ax
        shape = [None if ax == axis else shapes[0][ax] for ax in range(nd)]
        out[key] = (np.dtype(dts.pop()), axis, shape)
    return out


class RaggedDataset(Dataset):
    """Samples (dicts of arrays/tensors) spread over the ranks of `comm`.

    RaggedDataset(local_samples, name, comm=None, *, store=None, method=0,
                  batch_mode="onesided", ragged=None, as_data=False)

    Collective. `store` reuses an existing PyDDStore (variables are named
    ``name/field``)."""

    def __init__(self, local_samples, name, comm=None, *, store=None, method=0, batch_mode="onesided",
                 ragged=None, as_data=False):
        from mpi4py import MPI
        from .._core import PyDDStore

        self.comm = comm if comm is not None else MPI.COMM_WORLD
        forced = dict(ragged or {})
        try:
            local = (_local_spec(list(local_samples), forced), None)
        except Exception as exc:  # noqa: BLE001 - every rank learns it
            local = (None, f"rank {self.comm.Get_rank()}: {exc}")
        every = self.comm.allgather(local)
        errors = [e for _, e in every if e]
        if errors:
            raise InvalidArgumentError("RaggedDataset: " + "; ".join(errors))
        self.schema = _merge([s for s, _ in every], forced)
        if as_data:
            import torch_geometric.data  # noqa: F401 - ImportError when it is not installed
        self.as_data = as_data
        self.name = name
        self.store = store if store is not None else (
            PyDDStore(self.comm, method=method, batch_mode=batch_mode) if method == 0
            else PyDDStore(self.comm, method=method))
        self._own = store is None
        samples = list(local_samples)
        for key, (dt, axis, shape) in self.schema.items():
            var = f"{name}/{key}"
            fixed_shape = tuple(s for s in shape if s is not None)
            if axis is None:
                width = max(int(np.prod(shape, dtype=np.int64)), 1)
                rows = np.stack([_np(s[key]) for s in samples]) if samples else np.zeros((0, width), dt)
                self.store.add(var, np.ascontiguousarray(rows.reshape(len(samples), width)))
            else:
                parts = [np.ascontiguousarray(np.moveaxis(_np(s[key]), axis, 0)) for s in samples]
                self.store.add_ragged(var, parts, dtype=dt, row_shape=fixed_shape)
        counts = self.comm.allgather(len(samples))
        self._len = int(sum(counts))

    def __len__(self):
        return self._len

    def _field(self, key, idx):
        """One field of samples `idx`: a list of arrays."""
        dt, axis, shape = self.schema[key]
        var = f"{self.name}/{key}"
        fixed_shape = tuple(s for s in shape if s is not None)
        if axis is None:
            out = np.empty((len(idx), max(int(np.prod(shape, dtype=np.int64)), 1)), dt)
            self.store.get_batch(var, out, idx)
            return [row.reshape(tuple(shape)) for row in out]
        flat, lens = self.store.get_ragged_batch(var, idx, dt, fixed_shape)
        from .._ragged import split
        return [np.moveaxis(v, 0, axis) for v in split(flat, lens)]

    def get_batch(self, indices):
        """Samples `indices` (any order, repeats): one batched read per field."""
        idx = np.asarray(indices, np.int64)
        cols = {key: self._field(key, idx) for key in self.schema}
        # np.array, not ascontiguousarray, which turns a 0-d value (a scalar target) into 1-d.
        out = [{key: torch.from_numpy(np.array(cols[key][i], order="C")) for key in self.schema}
               for i in range(len(idx))]
        if self.as_data:
            from torch_geometric.data import Data
            return [Data(**d) for d in out]
        return out

    def __getitem__(self, i):
        return self.get_batch([i])[0]

    def __getitems__(self, indices):
        return self.get_batch(indices)

    def free(self):
        if self._own and self.store is not None:
            self.store.free()
        self.store = None
