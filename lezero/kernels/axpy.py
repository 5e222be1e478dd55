"""The optimizers' in-place updates in one pass: ``axpby_(y, b, x, a)`` is ``y = b*y + a*x``.

Written with NumPy operators an update such as SGD's ``p -= lr * g`` is two passes and a
temporary the size of the parameter (``lr * g``, then the subtraction), and momentum's
``buf = m * buf + g`` two more: for the MLP benchmark's 1000x1000 weight the first took
250 us against PyTorch's 66 (its ``add_`` is one fused pass), more than the step's bias,
ReLU and loss operators together.  The kernel reads ``x`` and ``y`` once and writes ``y``
once.

It rounds as the NumPy sequence ``y *= b; y += a * x`` does: ``a`` and ``b`` are cast to
the arrays' dtype, each product is rounded, then the sum (no fused multiply-add: Numba
leaves ``fastmath`` off), so the kernel and ``axpby_ref`` agree bit for bit.
``axpby_`` runs the kernel where ``fits`` says so (C-contiguous float32/float64 NumPy
arrays of one shape and dtype) and the reference (also the CuPy path) otherwise.
"""
import numpy as np

from lezero.kernels import enabled, jit

__all__ = ["axpby_", "axpby_ref", "axpby_numba", "fits"]


def axpby_ref(y, b, x, a):
    """``y = b*y + a*x`` in place with array operators (NumPy or CuPy)."""
    if b != 1:
        y *= b
    if a == 1:
        y += x
    else:
        y += a * x


@jit(cache=True, nogil=True)
def _axpby(y, b, x, a):
    for i in range(y.size):
        y[i] = b * y[i] + a * x[i]


def fits(y, x):
    """Whether the kernel takes ``y`` and ``x``."""
    return (enabled(y, x) and y.dtype == x.dtype and y.dtype in (np.float32, np.float64)
            and y.shape == x.shape and y.flags.c_contiguous and x.flags.c_contiguous)


def axpby_numba(y, b, x, a):
    """``axpby_ref`` as one Numba pass (arrays that ``fits`` takes)."""
    t = y.dtype.type
    _axpby(y.reshape(-1), t(b), x.reshape(-1), t(a))


def axpby_(y, b, x, a):
    """``y = b*y + a*x`` in place: the kernel where it ``fits``, else the reference."""
    (axpby_numba if fits(y, x) else axpby_ref)(y, b, x, a)
