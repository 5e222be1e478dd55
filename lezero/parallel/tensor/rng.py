"""Dropout randomness under tensor parallelism, as Megatron-LM arranges it.

Two kinds of dropout happen in a tensor-parallel model:

* on *replicated* activations (after a row-parallel layer's all-reduce: the residual
  dropouts, the embedding dropout) every rank of the tensor group holds the same values,
  so every rank must drop the *same* elements: these draw from LeZero's default
  generator, which the ranks keep in step (same seed, same draws);
* on *split* activations (the attention probabilities of this rank's heads) each rank
  holds different values, and its mask must be its own, or the heads of different ranks
  would be dropped in lock step: these draw from the *model-parallel* generator inside
  ``with model_parallel_rng(comm):``.

Megatron seeds a second CUDA generator with ``seed + 2718 + tp_rank`` and swaps it in
around those regions.  LeZero does the same with one change that keeps recomputation
exact: the generator used inside a region is made afresh from ``(seed + 2718 + tp_rank,
k)``, where ``k`` is drawn from the default generator on entry.  Every rank of the group
draws the same ``k`` (so the default generators stay in step), each rank's stream differs
(its seed does), and ``lz.checkpoint`` -- which restores the default generator before it
recomputes a segment -- reproduces the masks of every region inside the segment.
"""
import contextlib

import numpy as np

from lezero import random as lz_random
from lezero.utils.checks import check_int

OFFSET = 2718            # Megatron's offset of the model-parallel seed
_base_seed = 0


def model_parallel_manual_seed(seed):
    """Seed both generators (Megatron's ``model_parallel_cuda_manual_seed``): the default
    one with ``seed`` (call it with the same seed on every rank of a tensor group), the
    model-parallel one with ``seed + 2718 + tp_rank`` (the rank is the group's, applied
    in ``model_parallel_rng``)."""
    global _base_seed
    seed = check_int("parallel.model_parallel_manual_seed", "seed", seed, 0)
    lz_random.manual_seed(seed)
    _base_seed = seed


def model_parallel_seed(comm):
    """The model-parallel seed of this rank of ``comm``."""
    return _base_seed + OFFSET + comm.rank


@contextlib.contextmanager
def model_parallel_rng(comm=None):
    """Inside, LeZero's generator (NumPy's, and each device's in use) is this tensor
    rank's model-parallel one; on exit the default generator continues where it was."""
    from lezero.parallel.tensor.sharding import tp_comm
    comm = tp_comm(comm, "parallel.model_parallel_rng")
    default = lz_random.get_rng()
    key = int(default.integers(2 ** 62))           # the same on every rank of the group
    seed = model_parallel_seed(comm)
    saved = lz_random.get_rng_state()
    lz_random.set_rng_state(np.random.default_rng([seed, key]).bit_generator.state)
    device_saved = _swap_device_rngs(seed * 1000003 + key)
    try:
        yield
    finally:
        lz_random.set_rng_state(saved)
        _restore_device_rngs(device_saved)


def _swap_device_rngs(seed):
    """A device generator's state cannot always be set (CuPy's cannot): on each device in
    use, swap in a fresh generator seeded with ``seed``; returns what to put back."""
    from lezero.backends import devices_in_use
    return {b.name: lz_random.swap_device_rng(b.name, b.rng(seed)) for b in devices_in_use()}


def _restore_device_rngs(saved):
    for name, generator in saved.items():
        lz_random.swap_device_rng(name, generator)
