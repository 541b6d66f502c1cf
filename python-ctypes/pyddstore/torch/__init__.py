"""PyTorch datasets and a thread-based loader over libddstore (DDStore 3.0's
``pyddstore.torch``).

* :class:`DistDataset` spreads the samples of any map-style dataset over the
  ranks of a communicator, one store variable per sample field, and reads any
  sample back from any rank.
* :class:`DistDatasetReader` reads a dataset that a ``DistDataset`` published
  with ``method=2`` from a separate job.
* :class:`WindowedDataset` builds samples from several stored rows (time
  windows, clips) without storing a row twice.
* :class:`RaggedDataset` stores dict samples whose fields may be ragged
  (graphs: node features, positions, edge lists), one ragged or fixed
  variable per field (docs/ragged.md).
* :func:`row_of` maps (sub-dataset, index) of a ``ConcatDataset`` to its row.
* :class:`ThreadDataLoader` is a ``DataLoader`` whose workers are threads of
  the calling process.
* :class:`ResumableBatchSampler` cuts a global order that depends only on
  (seed, epoch, length) into per-rank batches, so ``ThreadDataLoader``'s
  ``state_dict()`` resumes a run on any number of ranks.

Importing this module imports torch, and neither mpi4py nor the library: MPI
starts when the first dataset is constructed, after torch was loaded. See
docs/pytorch.md.
"""

from ._datasets import DistDataset, DistDatasetReader
from ._loader import ThreadDataLoader
from ._ragged import RaggedDataset
from ._resume import ResumableBatchSampler, global_order
from ._schema import SUPPORTED_DTYPES, _safe_name  # noqa: F401 (tests and callers use them)
from ._windows import WindowedDataset, row_of

__all__ = ["DistDataset", "DistDatasetReader", "RaggedDataset", "ResumableBatchSampler", "ThreadDataLoader",
           "WindowedDataset", "global_order", "row_of"]
