"""Host implementations that the numpy backend's kernel table puts in front of the
backend-neutral references: NumPy features a device may lack (``ufunc.reduceat``,
``argsort(kind=...)``).  (The host's reusable scratch buffers are the table's ``scratch``,
in ``lezero.runtime.scratch``: a per-thread pool.)

Operators never call these directly; they ask ``get_backend(x).kernel(name, reference)``
(``lezero/backends/numpy_backend.py`` names them), so a device runs the reference.
"""
import numpy as np

__all__ = ["segment_max_rows", "stable_argsort"]


def segment_max_rows(bags, rows, starts, full):
    """For each non-empty bag (``full``) and feature, the row of the first largest entry
    among the bag's rows (``starts``: each bag's first row), by ``reduceat`` (no padding)."""
    n = rows.shape[0]
    first = starts[full]
    best = np.maximum.reduceat(rows, first, axis=0)
    hit = rows == np.repeat(best, bags.sizes[full], axis=0)
    cand = np.where(hit, np.arange(n)[:, None], n)
    pick = np.minimum.reduceat(cand, first, axis=0)
    return np.where(pick == n, first[:, None], pick)      # a bag of NaNs: its first


def stable_argsort(a, axis):
    """NumPy's stable argsort (its default quicksort is not stable)."""
    return np.argsort(a, axis=axis, kind="stable")
