"""ResumableBatchSampler: a distributed batch sampler whose global order
depends only on (seed, epoch, dataset length), so a training run stopped
mid-epoch resumes on any number of ranks with the same global order
(ThreadDataLoader.state_dict / load_state_dict). See docs/pytorch.md,
"Resuming a training run"."""

import operator

import numpy as np
from torch.utils.data import Sampler

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    """splitmix64's finaliser on a Python int (mod 2**64)."""
    z = (z + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _mix_array(z):
    """_mix on a uint64 array (numpy's uint64 array arithmetic wraps mod 2**64)."""
    z = z + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def global_order(n, seed, epoch, shuffle=True):
    """The epoch's global sample order: a permutation of range(n) as int64.

    A fixed algorithm written here (not a library generator, whose stream
    may change between numpy or torch versions): sample i gets the key
    splitmix64(base + i * 0x9E3779B97F4A7C15) with base =
    splitmix64(splitmix64(seed) + epoch), all mod 2**64, and the order is
    the samples sorted by key. The keys are distinct (i * an odd constant is
    a bijection mod 2**64, and so is splitmix64's finaliser), so any sort
    gives this order. shuffle=False: range(n)."""
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    base = _mix((_mix(seed) + epoch) & _M64)
    with np.errstate(over="ignore"):
        keys = _mix_array(np.uint64(base) + np.arange(n, dtype=np.uint64) * np.uint64(_GOLDEN))
    return np.argsort(keys).astype(np.int64)


def _nonneg(name, value, low=0, high=None):
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"ResumableBatchSampler: {name} must be an int, got {type(value).__name__}") from None
    if v < low or (high is not None and v > high):
        bound = f"{low} to {high}" if high is not None else f"{low} or more"
        raise ValueError(f"ResumableBatchSampler: {name} must be {bound}, got {v}")
    return v


class ResumableBatchSampler(Sampler):
    """Batches of this rank's samples, cut from a global order that depends
    only on (seed, epoch, dataset length).

    ResumableBatchSampler(dataset_or_length, global_batch_size, seed=0,
                          shuffle=True, drop_last=False, num_replicas=None,
                          rank=None, comm=None)

    Pass it as ``batch_sampler=`` of a ThreadDataLoader (or DataLoader).
    Each epoch, the global order (``global_order``) is cut into global
    batches of ``global_batch_size``; rank r of P yields, for every global
    batch, its contiguous part: samples [r G/P, (r+1) G/P) of the batch.
    So the ranks' parts of step k, concatenated in rank order, are global
    batch k whatever P is. P must divide ``global_batch_size``. The last
    global batch, when shorter (length not a multiple of G), is dropped
    with ``drop_last=True``; otherwise its m samples are split the same way
    with the first m % P ranks taking one more, and m < P is refused
    (ValueError: a rank's part would be empty). P and r come from
    ``num_replicas``/``rank``, else from ``comm`` (an mpi4py communicator),
    else MPI.COMM_WORLD.
    """

    def __init__(self, dataset_or_length, global_batch_size, seed=0, shuffle=True, drop_last=False,
                 num_replicas=None, rank=None, comm=None):
        try:
            n = operator.index(dataset_or_length)
        except TypeError:
            n = len(dataset_or_length)
        self.length = _nonneg("the dataset length", n)
        self.global_batch_size = _nonneg("global_batch_size", global_batch_size, 1)
        self.seed = _nonneg("seed", seed, 0, _M64)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if num_replicas is None or rank is None:
            if comm is None:
                from mpi4py import MPI  # only here: importing pyddstore.torch starts no MPI
                comm = MPI.COMM_WORLD
            num_replicas = comm.Get_size() if num_replicas is None else num_replicas
            rank = comm.Get_rank() if rank is None else rank
        self.num_replicas = _nonneg("num_replicas", num_replicas, 1)
        self.rank = _nonneg("rank", rank, 0, self.num_replicas - 1)
        if self.global_batch_size % self.num_replicas:
            # Unequal parts would weight samples unequally under DDP's mean
            # of per-rank means, and the parts of step k would depend on P.
            raise ValueError(f"ResumableBatchSampler: global_batch_size={self.global_batch_size} is not a "
                             f"multiple of the number of ranks ({self.num_replicas})")
        short = self.length % self.global_batch_size
        if not self.drop_last and 0 < short < self.num_replicas:
            # Some rank's part of the last batch would be empty, and a batch
            # of no samples cannot be collated.
            raise ValueError(f"ResumableBatchSampler: the last global batch holds {short} sample(s) "
                             f"({self.length} % {self.global_batch_size}), fewer than the {self.num_replicas} "
                             "ranks: pass drop_last=True or another global_batch_size")
        self.epoch = 0
        self._start = 0  # global batches of this epoch to skip at the next iter() (a resume)
        self._generation = 0  # changes when epoch or position are set: iterators made before are stale

    def set_epoch(self, epoch):
        """Selects the epoch of the next iter(). A different epoch starts at
        its first batch; the same epoch keeps a position restored by
        ThreadDataLoader.load_state_dict."""
        epoch = _nonneg("epoch", epoch)
        if epoch != self.epoch:
            self.epoch = epoch
            self._start = 0
            self._generation += 1

    def __len__(self):
        """Global batches per epoch (every rank takes this many steps)."""
        n, g = self.length, self.global_batch_size
        return n // g if self.drop_last else -(-n // g)

    def _part(self, batch):
        """This rank's contiguous part of a global batch."""
        m, p, r = len(batch), self.num_replicas, self.rank
        q, extra = divmod(m, p)
        lo = r * q + min(r, extra)
        return batch[lo:lo + q + (1 if r < extra else 0)]

    def __iter__(self):
        start, self._start = self._start, 0  # a resume applies once
        order = global_order(self.length, self.seed, self.epoch, self.shuffle)
        g = self.global_batch_size
        for b in range(start, len(self)):
            yield self._part(order[b * g:(b + 1) * g]).tolist()

    def _state(self, consumed):
        return {
            "version": 1,
            "epoch": self.epoch,
            "batches_consumed": consumed,
            "dataset_length": self.length,
            "seed": self.seed,
            "global_batch_size": self.global_batch_size,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
            "world_size": self.num_replicas,
        }

    def _load(self, state):
        """Checks a loader state against this sampler, then positions it."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict: the state must be a dict (from state_dict()), "
                            f"got {type(state).__name__}")
        missing = [k for k in self._state(0) if k not in state]
        if missing:
            raise ValueError(f"load_state_dict: the state lacks {missing!r} (not from ThreadDataLoader.state_dict()?)")
        if state["version"] != 1:
            raise ValueError(f"load_state_dict: state version {state['version']!r}, this pyddstore reads version 1")
        for key in ("dataset_length", "seed", "global_batch_size", "shuffle", "drop_last"):
            mine = getattr(self, "length" if key == "dataset_length" else key)
            if state[key] != mine:
                raise ValueError(f"load_state_dict: incompatible {key}: {state[key]!r} in the state, {mine!r} in "
                                 "this loader's sampler (the global order would differ)")
        epoch = _nonneg("the state's epoch", state["epoch"])
        consumed = _nonneg("the state's batches_consumed", state["batches_consumed"], 0, len(self))
        self.epoch = epoch
        self._start = consumed
        self._generation += 1
