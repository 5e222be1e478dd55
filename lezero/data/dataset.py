"""Dataset classes with ``torch.utils.data``'s names and meanings.

A *map-style* dataset (``Dataset``) has ``__getitem__(index)`` and ``__len__``; an
*iterable* dataset (``IterableDataset``) has ``__iter__`` and is read as a stream.
"""
import bisect
import math
import numbers

import numpy as np

from lezero.core import Variable
from lezero.data._random import check_generator, get_rng

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "random_split"]


class Dataset:
    """A map-style dataset: subclass it and define ``__getitem__`` and ``__len__``.

    Optionally define ``__getitems__(indices) -> list of samples`` to read a whole batch
    at once (faster for files that prefer one sorted read); the DataLoader uses it when
    present.  ``a + b`` concatenates two datasets.
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclass it and define ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy; use
    ``lezero.data.get_worker_info()`` inside ``__iter__`` to give each worker its share,
    or every sample is produced once per worker.
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the ``index``-th rows of equally long arrays: ``(a[i], b[i], ...)``."""

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset: needs at least one array")
        arrays = tuple(a.data if isinstance(a, Variable) else np.asarray(a) for a in arrays)
        for i, a in enumerate(arrays):
            if a.ndim == 0:
                raise ValueError(f"TensorDataset: array {i} is a scalar; arrays need a "
                                 f"leading sample axis")
            if len(a) != len(arrays[0]):
                raise ValueError(f"TensorDataset: arrays have different lengths, "
                                 f"{[len(x) for x in arrays]}")
        self.tensors = arrays

    def __getitem__(self, index):
        return tuple(a[index] for a in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index):
        if isinstance(index, (list, tuple)):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices):
        inner = [self.indices[i] for i in indices]
        if hasattr(self.dataset, "__getitems__"):
            return self.dataset.__getitems__(inner)
        return [self.dataset[i] for i in inner]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another: index ``len(a)`` is ``b[0]``."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: does not support IterableDataset "
                                "(use ChainDataset)")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(f"ConcatDataset: index {index} out of range for length "
                                 f"{len(self)}")
            index += len(self)
        part = bisect.bisect_right(self.cumulative_sizes, index)
        if part == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for length "
                             f"{len(self)}")
        start = self.cumulative_sizes[part - 1] if part > 0 else 0
        return self.datasets[part][index - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset: only IterableDatasets can be chained, "
                                f"got {type(d).__name__}")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given ``lengths``.

    ``lengths`` are counts that sum to ``len(dataset)``, or fractions that sum to 1 (the
    leftover samples go one each to the first subsets, as PyTorch does).  The permutation
    comes from ``generator`` (a ``np.random.Generator``), else LeZero's process generator.
    """
    check_generator("random_split", generator)
    n = len(dataset)
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths is empty")
    if all(isinstance(x, numbers.Integral) for x in lengths):
        counts = [int(x) for x in lengths]
        if any(c < 0 for c in counts):
            raise ValueError(f"random_split: lengths must be non-negative, got {lengths}")
    elif math.isclose(sum(lengths), 1.0, abs_tol=1e-6) and all(0 <= x <= 1 for x in lengths):
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
    else:
        raise ValueError(f"random_split: lengths must be counts summing to the dataset "
                         f"length {n} or fractions summing to 1, got {lengths}")
    if sum(counts) != n:
        raise ValueError(f"random_split: lengths sum to {sum(counts)}, but the dataset has "
                         f"{n} samples")
    rng = generator if generator is not None else get_rng()
    order = rng.permutation(n).tolist()
    subsets, start = [], 0
    for c in counts:
        subsets.append(Subset(dataset, order[start:start + c]))
        start += c
    return subsets
