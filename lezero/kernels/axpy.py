"""The optimizers' in-place updates in one pass: ``axpby_(y, b, x, a)`` is ``y = b*y + a*x``.

Written with NumPy operators an update such as SGD's ``p -= lr * g`` is two passes and a
temporary the size of the parameter (``lr * g``, then the subtraction), and momentum's
``buf = m * buf + g`` two more (docs/performance.md).  The kernel reads ``x`` and ``y``
once and writes ``y`` once.

It rounds as the NumPy sequence ``y *= b; y += a * x`` does: ``a`` and ``b`` are cast to
the arrays' dtype, each product is rounded, then the sum (no fused multiply-add: Numba
leaves ``fastmath`` off), so the kernel and ``axpby_ref`` agree bit for bit.
``axpby_`` runs the kernel where ``fits`` says so (C-contiguous float32/float64 NumPy
arrays of one shape and dtype) and the reference (also the CuPy path) otherwise.

Large updates run through the runtime's ``run_update``, which may cut them over two
threads when its recent timings say a split is faster (``lezero.runtime.adaptive``).
"""
import numpy as np

from lezero.kernels import enabled, jit
from lezero.runtime import run_update

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


def _takes(y, x):
    """C-contiguous float32/float64 NumPy arrays of one shape and dtype, ``y`` writeable:
    what the kernel relies on (it walks both as flat vectors of ``y.size``)."""
    return (isinstance(y, np.ndarray) and isinstance(x, np.ndarray) and y.dtype == x.dtype
            and y.dtype in (np.float32, np.float64) and y.shape == x.shape
            and y.flags.c_contiguous and x.flags.c_contiguous and y.flags.writeable)


def fits(y, x):
    """Whether the kernel takes ``y`` and ``x`` (and Numba is on)."""
    return enabled(y, x) and _takes(y, x)


def axpby_numba(y, b, x, a):
    """``axpby_ref`` as one Numba pass (arrays that ``fits`` takes; anything else raises:
    the kernel reads ``x`` over all of ``y`` without bounds checks, and a non-contiguous
    ``y`` would be updated in a copy)."""
    if not _takes(y, x):
        got = ", ".join(f"{n} {getattr(v, 'shape', type(v).__name__)} "
                        f"{getattr(v, 'dtype', '')}" for n, v in (("y", y), ("x", x)))
        raise ValueError("axpby_numba: y and x must be C-contiguous float32/float64 NumPy "
                         f"arrays of one shape and dtype, y writeable; got {got}")
    t = y.dtype.type
    b, a = t(b), t(a)
    run_update(lambda yp, xp: _axpby(yp, b, xp, a), y.reshape(-1), x.reshape(-1))


def axpby_(y, b, x, a):
    """``y = b*y + a*x`` in place: the kernel where it ``fits``, else the reference."""
    (axpby_numba if fits(y, x) else axpby_ref)(y, b, x, a)
