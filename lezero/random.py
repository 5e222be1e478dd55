"""One seedable random generator per process (``lz.manual_seed``).

Dropout, initialisers and DataLoader shuffling draw from here, so a single seed
reproduces a run.  Each device backend (CuPy, strict, a plugin) gets its own generator
(``Backend.rng``), seeded with the same seed.
"""
import numpy as np

from lezero.backends import devices_in_use, of_namespace

_rng = np.random.default_rng()
_device_rngs = {}       # device backend name -> its generator
_seed = None


def manual_seed(seed):
    """Seed LeZero's generators: NumPy's, and every device's (those in use now, and any
    other the first time it asks)."""
    global _rng, _seed
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative int, got {seed!r}")
    _seed = int(seed)
    _rng = np.random.default_rng(_seed)
    _device_rngs.clear()
    for backend in devices_in_use():
        _device_rngs[backend.name] = backend.rng(_seed)
    return _rng


def initial_seed():
    """The seed last given to ``manual_seed`` (None when never seeded)."""
    return _seed


def get_rng(xp=np):
    """The process generator for the array module ``xp`` (NumPy's, or a device's: each
    device backend has its own, made by ``Backend.rng`` on first use from the seed of
    ``manual_seed``, or from NumPy's generator when never seeded)."""
    backend = of_namespace(xp)
    if backend.is_host:
        return _rng
    generator = _device_rngs.get(backend.name)
    if generator is None:
        seed = _seed if _seed is not None else int(_rng.integers(2**63))
        generator = _device_rngs[backend.name] = backend.rng(seed)
    return generator


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
    return swap_device_rng("cupy", generator)


def swap_device_rng(name, generator):
    """``swap_cupy_rng`` for the device backend ``name``."""
    previous = _device_rngs.pop(name, None)
    if generator is not None:
        _device_rngs[name] = generator
    return previous
