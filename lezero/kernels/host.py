"""Host implementations that the numpy backend's kernel table puts in front of the
backend-neutral references: NumPy features a device may lack (``ufunc.reduceat``,
``argsort(kind=...)``) and the host's reusable scratch buffers.

Operators never call these directly; they ask ``get_backend(x).kernel(name, reference)``
(``lezero/backends/numpy_backend.py`` names them), so a device runs the reference.
"""
import math
import threading

import numpy as np

__all__ = ["segment_max_rows", "stable_argsort", "pooled_scratch", "clear_scratch",
           "scratch_bytes"]


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


# Large temporaries (im2col columns, Winograd products) are reused across calls instead of
# allocated: a fresh 75 MB array costs ~20k page faults, more than the copy into it.  Each
# thread has its own pool; a buffer is valid until the next request of the same name, so
# scratch never outlives the algorithm call that asked for it.

_pool = threading.local()


def pooled_scratch(name, shape, dtype, xp=np):
    """An uninitialised view of ``shape`` on this thread's host buffer ``name`` (grown
    when too small)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    bufs = getattr(_pool, "bufs", None)
    if bufs is None:
        bufs = _pool.bufs = {}
    buf = bufs.get(name)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[name] = np.empty(max(nbytes, 1), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def clear_scratch():
    """Free this thread's scratch buffers."""
    _pool.bufs = {}


def scratch_bytes():
    """Bytes held by this thread's scratch buffers."""
    return sum(b.nbytes for b in getattr(_pool, "bufs", {}).values())
