"""``Cast``: the Function that changes a Variable's dtype, and ``cast(x, dtype)``.

Autocast puts a ``Cast`` in front of an operator's inputs, so the graph stays honest: a
float32 parameter cast to float16 for a matmul receives its gradient back through the
cast, in float32 (the master weights never leave float32).  The backward of a cast is a
cast back, so double backward works through it.

Overflow is not an error here: a float32 value above 65504 becomes inf in float16, which
is exactly what ``GradScaler`` looks for.
"""
import numpy as np

from lezero.amp.convert import convert
from lezero.core import Function, Variable
from lezero.utils.checks import check_type

__all__ = ["Cast", "cast", "promote"]


class Cast(Function):
    """``y = x.astype(dtype)``; the gradient is cast back to x's dtype."""

    autocast_policy = "passthrough"     # autocast lets its own casts through
    save_inputs, reads_outputs = (), False   # backward needs x's dtype only

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def forward(self, x):
        self.src = x.dtype
        return convert(x, self.dtype)

    def backward(self, gy):
        return Cast(self.src)(gy)

    def backward_arrays(self, gy):
        return convert(gy, self.src)             # first order: no graph, a plain astype


def cast(x, dtype):
    """``x`` as ``dtype`` (a differentiable copy); ``x`` itself when it has that dtype."""
    check_type("amp.cast", "x", x, Variable)
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    return Cast(dtype)(x)


def promote(dtypes):
    """The widest of some float dtypes (float16 with bfloat16 meet in float32)."""
    try:
        return np.result_type(*dtypes)
    except (TypeError, np.exceptions.DTypePromotionError):
        return np.dtype(np.float32)
