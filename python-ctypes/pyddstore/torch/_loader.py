"""ThreadDataLoader: a DataLoader whose workers are threads of the calling
process (pinned to the cores MPI gave the rank), with reads in flight."""

import collections
import concurrent.futures
import logging
import os
import queue
import threading
import weakref

import torch
from torch.utils.data import DataLoader, IterableDataset, default_collate

from .. import _args
from .._errors import InvalidArgumentError
from ._datasets import _prefetch_arg
from ._resume import ResumableBatchSampler

try:  # the helper DataLoader itself uses for pin_memory=True
    from torch.utils.data._utils.pin_memory import pin_memory as _pin_memory
except ImportError:  # pragma: no cover
    _pin_memory = None

logger = logging.getLogger("pyddstore.torch")


# ThreadDataLoader

# Bound of DDSTORE_AFFINITY_WIDTH/OFFSET (entries of a CPU list).
_MAX_CPUS = (1 << 31) - 1


class _AffinityPlan:
    """CPU pinning of loader threads: thread k (in start order) is restricted
    to entries [offset + k*width, offset + (k+1)*width) of the affinity list
    the process had when the loader was made."""

    def __init__(self):
        # The library's rules (strict, errors naming the variable), not a
        # bare int() whose ValueError names nothing.
        self.width = _args.env_int("DDSTORE_AFFINITY_WIDTH", 0, 0, _MAX_CPUS)
        self.offset = _args.env_int("DDSTORE_AFFINITY_OFFSET", 0, 0, _MAX_CPUS)
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


class _Progress:
    """The position of one epoch's iterator over a ResumableBatchSampler:
    batches handed to the training loop so far (those read ahead do not
    count), valid while the sampler's epoch and position are unchanged."""

    def __init__(self, sampler, consumed):
        self.sampler = sampler
        self.generation = sampler._generation
        self.consumed = consumed


class _ThreadLoaderIter:
    """One epoch of a ThreadDataLoader: fetches run ahead in the loader's
    threads, and batches come back in sampler order."""

    _progress = None

    def __init__(self, loader):
        self._loader = loader
        # Resume bookkeeping: the epoch and position this iterator started
        # at; __next__ counts the batches handed out (not those fetched ahead).
        rs = loader._resumable()
        if rs is not None:
            self._progress = _Progress(rs, rs._start)
            loader._progress = self._progress
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
        if self._progress is not None:
            self._progress.consumed += 1  # the training loop has it
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
        self._progress = None  # the newest iterator's _Progress: the loader's position
        super().__init__(dataset, **kwargs)
        if isinstance(self.sampler, ResumableBatchSampler):
            raise TypeError("ThreadDataLoader: a ResumableBatchSampler yields batches: pass it as "
                            "batch_sampler=, not sampler=")
        self.prefetch = _prefetch_arg(getattr(dataset, "prefetch", 2) if prefetch is None else prefetch)
        if isinstance(dataset, IterableDataset):
            raise TypeError("ThreadDataLoader needs a map-style dataset (with __getitem__), "
                            "not an IterableDataset")
        self.reuse_buffers = bool(reuse_buffers)
        self.collate_copies = bool(collate_copies)
        threads = self.num_workers or 1
        # Read first: a bad variable fails before any buffer is allocated.
        affinity = _AffinityPlan()
        store = getattr(dataset, "ddstore", None)
        if threads > 1 and getattr(store, "method", None) == 0 and \
                getattr(store, "batch_mode", "collective") in ("collective", "auto"):
            raise InvalidArgumentError(
                f"ThreadDataLoader: num_workers={self.num_workers} over a method-0 dataset in the collective "
                "(or auto) batch mode: its batched reads are collective (one calling thread per rank); use the "
                "one-sided mode (DistDataset's default, batch_mode='onesided'), num_workers=1 (or 0), "
                "or method 1")
        if self.reuse_buffers:
            if not callable(getattr(dataset, "alloc", None)):
                raise TypeError("reuse_buffers needs a dataset with alloc() and __getitems__(indices, out=) "
                                f"(DistDataset or DistDatasetReader), got {type(dataset).__name__}")
            rows = self.batch_size
            rs = self._resumable()
            if rows is None and rs is not None:  # no part is longer than G/P
                rows = rs.global_batch_size // rs.num_replicas
            if rows is None:
                raise ValueError("reuse_buffers needs batch_size (automatic batching) or a "
                                 "ResumableBatchSampler: the buffers hold a batch's rows")
            if self.collate_fn is not default_collate and not self.collate_copies:
                raise ValueError("reuse_buffers reuses the buffers right after collate_fn: pass "
                                 "collate_copies=True to declare that this collate_fn copies the data")
            self._free_sets = queue.SimpleQueue()
            # Each batch whose reads are in flight holds a set too.
            for _ in range(threads + self.prefetch):
                bufs = dataset.alloc(rows)
                self._buffer_sets.append(bufs)
                self._free_sets.put(bufs)
        accel = getattr(torch, "accelerator", None)
        available = accel.is_available() if accel is not None else torch.cuda.is_available()
        self._pin = bool(self.pin_memory) and available and _pin_memory is not None
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="ddstore-loader", initializer=affinity)

    # Resuming (docs/pytorch.md, "Resuming a training run").

    def _resumable(self):
        bs = self.batch_sampler
        return bs if isinstance(bs, ResumableBatchSampler) else None

    def _resumable_or_raise(self, what):
        rs = self._resumable()
        if rs is None:
            raise TypeError(f"ThreadDataLoader.{what} needs batch_sampler=ResumableBatchSampler(...), whose "
                            f"order depends only on (seed, epoch, length); this loader's batch sampler is "
                            f"{type(self.batch_sampler).__name__}")
        return rs

    def state_dict(self):
        """Where the loader stands: the epoch, the global batches of it the
        training loop has taken (batches read ahead but not yet returned by
        next() do not count), the sampler's seed, global batch size,
        dataset length, shuffle and drop_last, and the number of ranks. The
        same on every rank; a plain dict for torch.save."""
        rs = self._resumable_or_raise("state_dict")
        p = self._progress
        if p is not None and p.sampler is rs and p.generation == rs._generation:
            consumed = p.consumed
        else:  # no iteration since set_epoch or load_state_dict
            consumed = rs._start
        return rs._state(consumed)

    def load_state_dict(self, state):
        """Positions the loader where state_dict() was taken (possibly by
        a job with another number of ranks): the next iteration of that
        epoch yields its remaining batches. Refuses (ValueError naming the
        field) a state whose dataset length, seed, global batch size,
        shuffle or drop_last differ from this loader's sampler."""
        rs = self._resumable_or_raise("load_state_dict")
        rs._load(state)
        self._progress = None

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
        collated = self._columns(self.dataset)
        try:
            if collated:
                pending = self.dataset._start_getitems(index, out=bufs, collated=True)
            else:
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
        fut = ex.submit(self._finish, pending, bufs, collated)
        fut.ddstore_reads = (pending, bufs)
        return fut

    def _columns(self, dataset):
        """Whether batches come straight from the dataset's read buffers:
        with the default collate, which the dataset can stand for (one
        tensor per field; no object per sample, no stacking)."""
        if self.collate_fn is not default_collate or not self._auto_collation:
            return False
        collates = getattr(dataset, "_collates", None)
        return collates is not None and collates()

    def _finish(self, pending, bufs, collated):
        try:
            data = pending.result()
            if self.collate_fn is not None and not collated:
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
        bufs = self._free_sets.get() if self._free_sets is not None else None
        try:
            if self._columns(dataset):
                data = dataset._getitems_collated(index, out=bufs)
            else:
                if bufs is not None:
                    data = dataset.__getitems__(index, out=bufs)
                elif not self._auto_collation:
                    data = dataset[index]
                else:
                    getitems = getattr(dataset, "__getitems__", None)
                    data = getitems(index) if getitems else [dataset[i] for i in index]
                if collate is not None:
                    data = collate(data)
        finally:
            if bufs is not None:
                self._free_sets.put(bufs)
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
