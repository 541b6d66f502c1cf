"""WindowedDataset (samples made of several stored rows, never storing a
row twice) and row_of (a ConcatDataset's (sub-dataset, index) to its row)."""

import operator

import numpy as np
from torch.utils.data import Dataset

from ._datasets import _prefetch_arg


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
