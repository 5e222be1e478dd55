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

Large updates (at least two parts of ``MIN_PART_ITEMS``) may be cut over two threads:
``threads.SplitWhenFaster`` runs them in one call or split, whichever its recent timings
say is faster.  On a warm cache a split costs more than it saves (a 1M-element update:
142 us in one call, 227 cut in two, 2026-12-05), but this VM spends spells of seconds in
a state where memory runs several times slower and one core cannot draw the bandwidth:
the MLP benchmark's SGD update then took 2.2 ms on one thread and 1.05 ms split, against
0.33 and 0.40 ms in the fast state (docs/performance.md, change 22, 2026-12-06).
``lz.Config.split_when_faster`` (default True) turns the split off.
"""
import numpy as np

from lezero.kernels import enabled, jit
from lezero.kernels.threads import SplitWhenFaster

__all__ = ["axpby_", "axpby_ref", "axpby_numba", "fits"]

MIN_PART_ITEMS = 1 << 18    # 256k elements: see above; the MLP's 784k and 1M weights split
_runner = SplitWhenFaster(MIN_PART_ITEMS)


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
    _runner.run(lambda yp, xp: _axpby(yp, b, xp, a), y.reshape(-1), x.reshape(-1))


def axpby_(y, b, x, a):
    """``y = b*y + a*x`` in place: the kernel where it ``fits``, else the reference."""
    (axpby_numba if fits(y, x) else axpby_ref)(y, b, x, a)
