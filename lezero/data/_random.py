"""Random streams for data loading.

Two needs pull in different directions: every worker process must draw its own random
numbers (two workers must not apply the same "random" crop), and a run must give the same
batches for the same seed whatever ``num_workers`` is.  Per-worker streams alone cannot do
both, because which worker builds which batch depends on the worker count.

So the stream that transforms draw from is tied to the *batch*, not to the process: before a
batch is built, the loader installs a generator derived from ``(seed, epoch, batch index)``
with ``np.random.SeedSequence``.  Batches are built in different workers, so workers use
different streams; and batch ``k`` of epoch ``e`` gets the same stream in any worker.
``get_rng()`` returns that generator (outside a loader: LeZero's process generator).
"""
import threading

import numpy as np

from lezero.core import get_rng as _process_rng

# The first word of every spawn key says what the stream is for, so the streams of one
# seed never overlap: shuffling, per-batch augmentation, per-worker legacy seeding.
SHUFFLE, AUGMENT, WORKER = 0, 1, 2

_local = threading.local()


def get_rng():
    """The NumPy ``Generator`` that data code (transforms, ``__getitem__``) should draw from.

    Inside a ``DataLoader`` it is the current batch's generator, reproducible from the
    loader's ``seed`` whatever ``num_workers`` is; elsewhere it is LeZero's process
    generator (``lz.manual_seed``).
    """
    rng = getattr(_local, "rng", None)
    return rng if rng is not None else _process_rng()


class using_rng:
    """Context manager: make ``rng`` what ``get_rng()`` returns inside the block."""

    def __init__(self, rng):
        self.rng = rng

    def __enter__(self):
        self._saved = getattr(_local, "rng", None)
        _local.rng = self.rng
        return self.rng

    def __exit__(self, *exc):
        _local.rng = self._saved
        return False


def stream(seed, *key):
    """A generator for ``seed`` and a spawn key (a tuple of small ints)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def draw_seed():
    """A fresh 63-bit seed from LeZero's process generator (for ``seed=None``)."""
    return int(_process_rng().integers(2 ** 63))


def check_generator(owner, generator):
    """Validate a ``generator`` argument: None or a ``np.random.Generator``."""
    if generator is not None and not isinstance(generator, np.random.Generator):
        raise TypeError(f"{owner}: generator must be a numpy.random.Generator or None, "
                        f"got {type(generator).__name__}")
    return generator
