"""The sum of two arrays of one shape, cut over threads when long.

``x0 + x1`` in NumPy is one fast pass but on one core; a residual block's add (ResNet's
``out + identity``, a transformer's ``x + attn``) is a few hundred thousand to millions
of elements, as long as the ReLU after it.  The kernel is the same single pass, run as one
contiguous range per thread (``run_elementwise``) when each range gets
``policy.cheap_min_part_items`` elements, as ReLU's is.  Each element is one rounding, so
kernel and reference agree bit for bit.

``add_ref`` is the NumPy (and CuPy) reference with broadcasting, ``add_numba`` the kernel
(float32/float64 NumPy arrays of one shape and dtype), ``add`` dispatches: the kernel only
where it can split (shorter arrays and broadcasting stay on NumPy).
"""
import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.runtime import policy, run_elementwise, threads_for

__all__ = ["add", "add_ref", "add_numba"]


def add_ref(x0, x1):
    """``x0 + x1`` with broadcasting (a new array)."""
    return x0 + x1


@jit(cache=True, nogil=True, error_model="numpy")
def _add(x0, x1, out):
    for i in range(x0.size):
        out[i] = x0[i] + x1[i]


def add_numba(x0, x1):
    """``add_ref`` for float NumPy arrays of one shape and dtype (the kernel reads
    ``x1[i]`` for every element of ``x0``)."""
    argcheck.arrays("add_numba", x0=x0, x1=x1)
    argcheck.floats("add_numba", "x0", x0)
    argcheck.same_shape("add_numba", "x0", x0, "x1", x1)
    if x0.dtype != x1.dtype:
        raise TypeError(f"add_numba: x0 and x1 must have one dtype, got {x0.dtype} and "
                        f"{x1.dtype}")
    out = np.empty(x0.shape, x0.dtype)
    run_elementwise(_add, np.ascontiguousarray(x0).reshape(-1),
                    np.ascontiguousarray(x1).reshape(-1), out.reshape(-1),
                    min_part=policy.cheap_min_part_items)
    return out


def add(x0, x1):
    """``x0 + x1``: the kernel for long C-contiguous float arrays of one shape and dtype
    (where it splits over threads), else NumPy.  (``Add.forward`` calls it only for a
    long ``x0``: most adds are short.)"""
    if (type(x0) is np.ndarray and type(x1) is np.ndarray and x0.shape == x1.shape
            and x0.dtype == x1.dtype and x0.dtype.kind == "f" and x0.dtype.itemsize >= 4
            and x0.flags.c_contiguous and x1.flags.c_contiguous
            and threads_for(x0.size, x0.size, policy.cheap_min_part_items) > 1
            and enabled(x0, x1)):
        return add_numba(x0, x1)
    return add_ref(x0, x1)
