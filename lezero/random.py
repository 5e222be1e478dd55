"""One seedable random generator per process (``lz.manual_seed``).

Dropout, initialisers and DataLoader shuffling draw from here, so a single seed
reproduces a run.  CuPy gets its own generator, seeded together with NumPy's.
"""
import sys

import numpy as np

_rng = np.random.default_rng()
_cupy_rng = None
_seed = None


def manual_seed(seed):
    """Seed LeZero's generators (NumPy, and CuPy when it is in use)."""
    global _rng, _cupy_rng, _seed
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative int, got {seed!r}")
    _seed = int(seed)
    _rng = np.random.default_rng(_seed)
    _cupy_rng = None
    if "cupy" in sys.modules:
        _cupy_rng = sys.modules["cupy"].random.default_rng(_seed)
    return _rng


def initial_seed():
    """The seed last given to ``manual_seed`` (None when never seeded)."""
    return _seed


def get_rng(xp=np):
    """The process generator for the array module ``xp`` (NumPy or CuPy)."""
    global _cupy_rng
    if xp is np:
        return _rng
    if _cupy_rng is None:
        _cupy_rng = xp.random.default_rng(int(_rng.integers(2**63)))
    return _cupy_rng


def get_rng_state():
    """A snapshot of the NumPy generator's state (for exact recomputation)."""
    return _rng.bit_generator.state


def set_rng_state(state):
    """Restore a snapshot taken by ``get_rng_state``."""
    _rng.bit_generator.state = state


def swap_cupy_rng(generator):
    """Install ``generator`` as the CuPy generator and return the one it replaces (None
    when none was made yet).  CuPy's generator state cannot be copied, so code that must
    replay random draws (checkpoint recomputation, per-rank dropout in tensor
    parallelism) swaps whole generators instead; pass the returned one back to undo."""
    global _cupy_rng
    previous, _cupy_rng = _cupy_rng, generator
    return previous
