"""Numba kernels for hot CPU operators, one module per operator.

Every ``kernels/<op>.py`` holds three things:

* ``<op>_ref``: the NumPy reference (written with ``xp.*``, it is also the CuPy path);
* the Numba kernel -- plain functions decorated with ``@jit(...)`` -- with the argument
  checks that guard it (``argcheck``), and ``<op>_numba``, which calls it;
* ``<op>``: the dispatcher operators call, which runs the kernel where ``enabled(...)``
  says so and the reference otherwise.

Threads and BLAS belong to ``lezero.runtime``: a kernel that can be split hands its
ranges to one of the runtime's runners (``run_elementwise``, ``run_ranges``,
``run_meeting``, ``launch``, ``run_update``) and takes its thresholds from
``lezero.runtime.policy``; no module here starts a thread or sets BLAS's thread count.
``@jit``, ``prange`` and the lazy Numba import are the runtime's ``lazyjit``, re-exported
here: importing a kernel module costs nothing, and ``import lezero`` never imports Numba.

``tests/kernels/test_kernels_match_references.py`` checks every ``*_numba`` against its
reference over shapes and dtypes, from one table.

``enabled(*arrays)``: Numba runs only for NumPy arrays, when ``Config.use_numba`` is on and
Numba imports.  On the GPU the same operators use CuPy, never these CPU kernels.
"""
import numpy as np

from lezero.core import get_config
from lezero.runtime.lazyjit import (intrinsic, jit, load, numba_available, numba_module,
                                    prange, uint64)

__all__ = ["numba_available", "numba_module", "enabled", "jit", "intrinsic", "load",
           "prange", "uint64"]


def enabled(*arrays):
    """True when the Numba path should run for these arrays."""
    return (get_config().use_numba and all(isinstance(a, np.ndarray) for a in arrays)
            and numba_available())
