"""The host's reusable scratch buffers: the numpy backend's ``scratch`` kernel.

Large temporaries (im2col columns, Winograd products) are reused across calls instead of
allocated: a fresh 75 MB array costs ~20k page faults, more than the copy into it.  Each
thread has its own pool; a buffer is valid until the next request of the same name, so
scratch never outlives the algorithm call that asked for it.
"""
import math
import threading

import numpy as np

__all__ = ["pooled_scratch", "clear_scratch", "scratch_bytes"]

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
