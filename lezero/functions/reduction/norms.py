"""norm: vector and matrix norms with ``numpy.linalg.norm``'s arguments (ord, axis, keepdims).

p-norms are computed on x / max|x| and scaled back, so large entries do not overflow in the
powers (float32 squares overflow above about 1.8e19); the 2-norm takes that path only where
the plain sum of squares over- or underflows.  Their gradient is
sign(x) * (|x| / norm) ** (p - 1), which stays bounded, and is 0 where the norm is 0 (as
PyTorch).  The inf norms and the matrix 1/inf norms are built from abs, sum, max and min.
"""
import math

import numpy as np

from lezero.core import Function
from lezero.functions.common import operands, xp_of
from lezero.functions.math import abs, sign, where
from lezero.functions.reduction.basic import (expand, keepdims_shape, reduced_shape,
                                              reduced_size)
from lezero.functions.reduction.basic import sum as sum_
from lezero.functions.reduction.order import max as max_
from lezero.functions.reduction.order import min as min_
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_axis, check_bool

__all__ = ["norm"]


class PNorm(Function):
    """(sum |x| ** p) ** (1 / p) over ``axis`` for p > 0; the count of nonzeros for p = 0."""

    def __init__(self, p, axis, keepdims):
        self.p = p
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        xp = xp_of(x)
        p, axis = self.p, self.axis
        if p == 2:
            # The common case: sum(x * x) is exact enough unless it over- or underflowed
            # somewhere, and then the scaled computation below runs instead.
            with np.errstate(over="ignore", under="ignore"):
                s = (x * x).sum(axis=axis, keepdims=True)
            if _squares_in_range(s):
                y = xp.sqrt(s)
                return y if self.keepdims else y.reshape(reduced_shape(x.shape, axis))
        a = xp.abs(x)
        if p == 0:
            y = (a != 0).sum(axis=axis, keepdims=True).astype(x.dtype)
        else:
            m = 1
            if reduced_size(x.shape, axis) > 0:
                m = a.max(axis=axis, keepdims=True)
                m = xp.where((m > 0) & xp.isfinite(m), m, 1)   # inf / nan fall through
            t = a / m
            if p == 2:
                y = xp.sqrt((t * t).sum(axis=axis, keepdims=True)) * m
            else:
                y = (t ** p).sum(axis=axis, keepdims=True) ** (1.0 / p) * m
        return y if self.keepdims else y.reshape(reduced_shape(x.shape, axis))

    def backward(self, gy):
        x = self.inputs[0]
        if self.p == 0:              # a count: zero gradient, as torch.linalg.vector_norm
            return expand(gy, x.shape, self.axis, self.keepdims) * 0.0
        # gy and the norm keep the reduced axes as length 1 and broadcast against x.
        kept = keepdims_shape(x.shape, self.axis)
        g = reshape(gy, kept)
        y = reshape(self.outputs[0](), kept)
        safe = where(y.data == 0, 1.0, y)    # norm 0 means x is 0 there: gradient 0
        if self.p == 2:
            return g / safe * x
        return g * sign(x) * (abs(x) / safe) ** (self.p - 1)


def _squares_in_range(s):
    """True when every sum of squares in ``s`` is finite and far enough above the smallest
    normal number that the squares lost no precision to underflow (zeros included:
    they may be underflowed squares)."""
    info = np.finfo(s.dtype)
    return bool(((s >= info.tiny / info.eps) & (s <= info.max)).all())


def _finish(y, x_shape, axes, keepdims):
    """Drop the kept reduced axes of ``y`` unless ``keepdims``."""
    return y if keepdims else reshape(y, reduced_shape(x_shape, axes))


def _vector_norm(x, ord, axes, keepdims):
    if ord is None or ord == 2:
        return PNorm(2, axes, keepdims)(x)
    if ord == math.inf or ord == -math.inf:
        extreme = max_ if ord > 0 else min_
        return extreme(abs(x), axis=axes, keepdims=keepdims)
    if ord == 1:
        return sum_(abs(x), axis=axes, keepdims=keepdims)
    return PNorm(float(ord), axes, keepdims)(x)


def _matrix_norm(x, ord, axes, keepdims):
    """Frobenius, or the max/min absolute column sum (ord 1/-1) or row sum (ord inf/-inf)
    over the (row, column) axes ``axes``."""
    if ord is None or ord == "fro":
        return PNorm(2, tuple(sorted(axes)), keepdims)(x)
    row, col = axes
    summed, picked = (row, col) if ord in (1, -1) else (col, row)
    extreme = max_ if ord > 0 else min_
    y = extreme(sum_(abs(x), axis=summed, keepdims=True), axis=picked, keepdims=True)
    return _finish(y, x.shape, tuple(sorted(axes)), keepdims)


_VECTOR_ORDS = "None, 2, 1, 0, inf, -inf or a real p > 0"
_MATRIX_ORDS = "None, 'fro', 1, -1, inf or -inf"


def _is_number(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


@register("reduction", notes="vector p/inf norms and matrix fro/1/inf norms; overflow-safe")
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, with ``numpy.linalg.norm``'s arguments.

    * ``axis=None, ord=None``: the 2-norm of the flattened input (Frobenius for matrices).
    * an int ``axis`` (or a 1-D input): a vector norm; ``ord`` is 2 (default), 1, 0 (the
      count of nonzeros), inf (max |x|), -inf (min |x|) or a real p > 0 (for p < 1
      not a norm, but computed as NumPy and PyTorch do: (sum |x| ** p) ** (1 / p)).
    * a 2-tuple ``axis`` (or a 2-D input with ``ord`` given): a matrix norm; ``ord`` is
      'fro' (default), 1 / -1 (max / min column sum of |x|), inf / -inf (row sums).
      The spectral and nuclear norms (2, -2, 'nuc') need an SVD and are not provided.
    """
    (x,) = operands("norm", ("x",), (x,), kinds="f")
    check_bool("norm", "keepdims", keepdims)
    if not (ord is None or isinstance(ord, str) or _is_number(ord)):
        raise TypeError(f"norm: ord must be None, a number or 'fro', got {type(ord).__name__}")
    ndim = x.ndim
    if axis is None:
        if ord is None:
            axes = None
        elif ndim in (1, 2):
            axes = tuple(range(ndim))
        else:
            raise ValueError(f"norm: ord={ord!r} with axis=None needs a 1-D or 2-D input, got "
                             f"shape {x.shape}; pass axis")
    else:
        given = axis if isinstance(axis, (tuple, list)) else (axis,)
        axes = tuple(check_axis("norm", a, ndim) for a in given)
        if len(axes) not in (1, 2) or len(set(axes)) != len(axes):
            raise ValueError(f"norm: axis must be one axis or two distinct axes, got {axis!r}")
        if ndim == 0:               # a scalar: axis 0 means "everything", as in reductions
            axes = None

    if axes is None or len(axes) == 1:
        if not (ord is None or _is_number(ord) and (ord >= 0 or ord == -math.inf)):
            raise ValueError(f"norm: vector ord must be {_VECTOR_ORDS}, got {ord!r}")
        if ord in (math.inf, -math.inf) and reduced_size(x.shape, axes) == 0:
            raise ValueError(f"norm: ord={ord} of zero elements is undefined "
                             f"(input shape {x.shape})")
        return _vector_norm(x, ord, axes, keepdims)
    if not (ord in (None, "fro") or _is_number(ord) and ord in (1, -1, math.inf, -math.inf)):
        raise ValueError(f"norm: matrix ord must be {_MATRIX_ORDS}, got {ord!r} (2, -2 and "
                         "'nuc' need an SVD and are not supported)")
    if ord not in (None, "fro") and reduced_size(x.shape, axes) == 0:
        raise ValueError(f"norm: ord={ord} of an empty matrix is undefined "
                         f"(input shape {x.shape})")
    return _matrix_norm(x, ord, axes, keepdims)
