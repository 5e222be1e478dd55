"""Building one batch: read samples from the dataset and collate them.

The same code runs in the main process (``num_workers=0``) and in every worker, which is
what makes the batches identical whatever the worker count.
"""
import itertools

from lezero.data._random import AUGMENT, stream, using_rng
from lezero.data.collate import collate_into


def _collate(collate_fn, samples, alloc):
    if alloc is None:
        return collate_fn(samples)
    with collate_into(alloc):      # only the collate step: datasets' own arrays stay theirs
        return collate_fn(samples)


class MapFetcher:
    """Map-style: a batch is the list of indices the batch sampler chose."""

    def __init__(self, dataset, auto_collation, collate_fn):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batched = auto_collation and hasattr(dataset, "__getitems__")

    def fetch(self, indices, alloc=None):
        """The batch at ``indices``; ``alloc`` (in workers) is where collate stacks it."""
        if not self.auto_collation:
            return self.collate_fn(self.dataset[indices])
        if self.batched:
            samples = self.dataset.__getitems__(indices)
        else:
            samples = [self.dataset[i] for i in indices]
        return _collate(self.collate_fn, samples, alloc)


class IterableFetcher:
    """Iterable-style: a batch is the next ``batch_size`` items of the stream.

    ``fetch`` raises StopIteration when the stream is exhausted (and, with ``drop_last``,
    when only a short batch is left).
    """

    def __init__(self, dataset, auto_collation, collate_fn, batch_size, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batch_size = batch_size
        self.drop_last = drop_last

    def fetch(self, alloc=None):
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        items = list(itertools.islice(self.iterator, self.batch_size))
        if not items or (self.drop_last and len(items) < self.batch_size):
            raise StopIteration
        return _collate(self.collate_fn, items, alloc)


def batch_stream(seed, epoch, *position):
    """The context in which a batch is built: ``get_rng()`` is this batch's generator."""
    return using_rng(stream(seed, AUGMENT, epoch, *position))
