"""Samplers: which indices an epoch visits, and in what order (``torch.utils.data`` names).

Random samplers take ``generator`` (a ``np.random.Generator``).  Without one, each epoch
draws a fresh seed from LeZero's process generator, so ``lz.manual_seed`` reproduces it.
"""
import itertools
import numbers

import numpy as np

from lezero.data._random import check_generator, draw_seed
from lezero.utils.checks import check_bool, check_int

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler"]


class Sampler:
    """Base class: ``__iter__`` yields dataset indices; ``__len__`` counts them."""

    def __iter__(self):
        raise NotImplementedError

    def __len__(self):
        raise TypeError(f"{type(self).__name__} has no length")


def positive_int(owner, name, value, allow_none=False):
    """An int (TypeError otherwise) above 0 (ValueError otherwise), or None if allowed."""
    value = check_int(owner, name, value, allow_none=allow_none)
    if value is not None and value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return value


def _epoch_rng(generator):
    return generator if generator is not None else np.random.default_rng(draw_seed())


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order: a permutation per pass (``replacement=False``) or independent draws.

    ``num_samples`` (default ``len(data_source)``) may exceed the dataset length without
    replacement: whole permutations follow each other.
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        check_bool("RandomSampler", "replacement", replacement)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = positive_int("RandomSampler", "num_samples", num_samples, True)
        self.generator = check_generator("RandomSampler", generator)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, total = len(self.data_source), self.num_samples
        if n == 0:
            return iter(())
        rng = _epoch_rng(self.generator)
        if self.replacement:
            return iter(rng.integers(0, n, size=total).tolist())
        parts = [rng.permutation(n) for _ in range(total // n)]
        parts.append(rng.permutation(n)[:total % n])
        return iter(np.concatenate(parts).tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = list(indices)
        self.generator = check_generator("SubsetRandomSampler", generator)

    def __iter__(self):
        order = _epoch_rng(self.generator).permutation(len(self.indices))
        return iter([self.indices[i] for i in order])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or w.size == 0:
            raise ValueError(f"WeightedRandomSampler: weights must be a non-empty 1-D "
                             f"sequence, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative "
                             "and not all zero")
        check_bool("WeightedRandomSampler", "replacement", replacement)
        self.num_samples = positive_int("WeightedRandomSampler", "num_samples", num_samples)
        if not replacement and self.num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: cannot draw {self.num_samples} samples "
                             f"without replacement from {np.count_nonzero(w)} non-zero "
                             f"weights")
        self.weights = w
        self.replacement = replacement
        self.generator = check_generator("WeightedRandomSampler", generator)

    def __iter__(self):
        rng = _epoch_rng(self.generator)
        p = self.weights / self.weights.sum()
        picks = rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        return iter(picks.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size``; with ``drop_last``
    the last, shorter list is dropped."""

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = positive_int("BatchSampler", "batch_size", batch_size)
        check_bool("BatchSampler", "drop_last", drop_last)
        self.sampler = sampler
        self.drop_last = drop_last

    def __iter__(self):
        # islice fills a batch in C: the main process runs this for every batch, and with
        # workers it is most of what the main process does per sample.
        indices = iter(self.sampler)
        while True:
            batch = list(itertools.islice(indices, self.batch_size))
            if len(batch) == self.batch_size:
                yield batch
                continue
            if batch and not self.drop_last:
                yield batch
            return

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """This rank's share of the dataset for data-parallel training.

    The epoch's order (shuffled from ``seed`` and ``set_epoch``, the same on every rank) is
    dealt out round-robin: rank ``r`` takes positions ``r, r + R, r + 2R, ...``.  Every
    sample is used exactly once per epoch across the ranks, so rank lengths may differ by
    one.  ``drop_last=True`` drops the tail that does not divide evenly, and ``pad=True``
    instead repeats samples from the start (PyTorch's behaviour): both make every rank run
    the same number of steps, which lock-step collectives need.

    ``num_replicas`` and ``rank`` default to ``lezero.parallel``'s world when initialised.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, pad=False):
        if num_replicas is None or rank is None:
            world = _parallel_world()
            num_replicas = world.size if num_replicas is None else num_replicas
            rank = world.rank if rank is None else rank
        self.num_replicas = positive_int("DistributedSampler", "num_replicas", num_replicas)
        if not isinstance(rank, numbers.Integral) or not 0 <= rank < self.num_replicas:
            raise ValueError(f"DistributedSampler: rank must be in [0, {self.num_replicas}), "
                             f"got {rank!r}")
        if drop_last and pad:
            raise ValueError("DistributedSampler: drop_last and pad are mutually exclusive")
        self.dataset = dataset
        self.rank = int(rank)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.pad = pad
        self.epoch = 0

    def set_epoch(self, epoch):
        """Call at the start of each epoch so that each epoch has a new order."""
        self.epoch = int(epoch)

    def _total(self):
        n, r = len(self.dataset), self.num_replicas
        if self.drop_last:
            return n - n % r
        if self.pad:
            return -(-n // r) * r
        return n

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(n)
        else:
            order = np.arange(n)
        total = self._total()
        if total > n:   # pad: wrap around to the start
            order = np.resize(order, total)
        return iter(order[:total][self.rank::self.num_replicas].tolist())

    def __len__(self):
        return len(range(self.rank, self._total(), self.num_replicas))


def _parallel_world():
    """lezero.parallel's world, if this process initialised it (as torch's sampler needs
    an initialised process group); never initialises it as a side effect."""
    from lezero.parallel import get_world, is_initialized
    if not is_initialized():
        raise ValueError("DistributedSampler: pass num_replicas and rank, or call "
                         "lezero.parallel.init() first")
    return get_world()
