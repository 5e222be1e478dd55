"""Numba kernels for hot CPU operators; each kernel module keeps a NumPy reference beside it.

Operators call ``enabled(x)`` to decide: Numba runs only for NumPy arrays, when
``Config.use_numba`` is on and Numba imports.  Kernels compile with ``cache=True``.
On the GPU the same operators use CuPy, never these CPU kernels.
"""
import numpy as np

from lezero.core.config import get_config, register_setting

# Operators consult this before running a Numba kernel; ``Config.use_numba = False`` (or
# ``using_config("use_numba", False)``) runs the NumPy references instead.
register_setting("use_numba", True)

_numba = None


def numba_available():
    """True when Numba can be imported (checked once)."""
    global _numba
    if _numba is None:
        try:
            import numba  # noqa: F401
            _numba = True
        except ImportError:
            _numba = False
    return _numba


def enabled(*arrays):
    """True when the Numba path should run for these arrays."""
    return (get_config().use_numba and all(isinstance(a, np.ndarray) for a in arrays)
            and numba_available())
