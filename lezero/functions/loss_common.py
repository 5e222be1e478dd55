"""Pieces shared by the loss and normalization families.

* argument checks (reduction strings, float inputs, matching shapes, numbers);
* ``reduce_loss``: the 'none' / 'mean' / 'sum' step at the end of most losses;
* a few small elementwise Functions the losses are composed from (absolute value,
  clamp, sigmoid, softplus, softmax, log-softmax, p-norm).  Each forward works on raw
  arrays (NumPy or CuPy) and each backward is written with LeZero operators, so losses
  built from them can be differentiated to any order.

Piecewise functions (``absolute``, ``clamp_min``) express the choice of piece as a
*constant* mask: its derivative is zero, which is the true derivative everywhere except at
the kink, where PyTorch's convention is followed (|x|'(0) = 0, clamp_min passes x >= min).
"""
import math

import numpy as np

from lezero.core import Function, Variable
from lezero.functions._utils import check_float, constant, data_of, xp_of
from lezero.functions.math import exp
from lezero.functions.reduction import sum as _sum

REDUCTIONS = ("none", "mean", "sum")


# ----- argument checks -----------------------------------------------------------------

def check_reduction(op, reduction, allowed=REDUCTIONS):
    """Raise ValueError unless ``reduction`` is one of ``allowed``."""
    if not isinstance(reduction, str) or reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {', '.join(map(repr, allowed))}, "
                         f"got {reduction!r}")
    return reduction


def check_number(op, name, value, low=None, high=None, low_open=False):
    """A real Python/NumPy number in [low, high] (``low_open``: (low, high]) as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: {name} must be a number, got {type(value).__name__}")
    value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    if math.isnan(value) or too_low or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        interval = f"{'(' if low_open else '['}{lo}, {hi}]"
        raise ValueError(f"{op}: {name} must be in {interval}, got {value}")
    return value


def check_same_shape(op, name_a, a, name_b, b):
    """Raise ValueError unless the arrays behind ``a`` and ``b`` have one shape."""
    sa, sb = data_of(a).shape, data_of(b).shape
    if sa != sb:
        raise ValueError(f"{op}: {name_b} has shape {sb} but {name_a} has shape {sa}; "
                         "they must be equal")


def check_floats(op, **named):
    """``check_float`` for each keyword (name=value); also require one common dtype."""
    dtypes = {}
    for name, value in named.items():
        dtypes[name] = check_float(op, name, value).dtype
    if len(set(dtypes.values())) > 1:
        got = ", ".join(f"{n} {d}" for n, d in dtypes.items())
        raise TypeError(f"{op}: inputs must share one floating dtype, got {got}")


# ----- reductions ----------------------------------------------------------------------

def reduce_loss(loss, reduction):
    """Apply 'none' (unchanged), 'sum' or 'mean' (over all elements) to a loss Variable."""
    if reduction == "none":
        return loss
    total = _sum(loss)
    if reduction == "sum":
        return total
    return total / loss.size


# ----- small elementwise Functions -----------------------------------------------------

class Absolute(Function):
    def forward(self, x):
        return xp_of(x).abs(x)

    def backward(self, gy):
        x = self.inputs[0].data
        return gy * constant(xp_of(x).sign(x))


def absolute(x):
    """|x|, with gradient sign(x) (0 at 0, as PyTorch)."""
    return Absolute()(x)


class ClampMin(Function):
    def __init__(self, low):
        self.low = low

    def forward(self, x):
        xp = xp_of(x)
        self.mask = x >= self.low
        return xp.maximum(x, xp.asarray(self.low, dtype=x.dtype))

    def backward(self, gy):
        return gy * constant(self.mask.astype(gy.dtype))


def clamp_min(x, low):
    """max(x, low) elementwise; the gradient passes where x >= low (PyTorch's clamp_min)."""
    return ClampMin(low)(x)


def relu(x):
    """max(x, 0), with PyTorch's clamp_min(0) gradient convention."""
    return clamp_min(x, 0.0)


class Sigmoid(Function):
    def forward(self, x):
        xp = xp_of(x)
        # exp(-softplus(-x)) never overflows, for either sign of x.
        return xp.exp(-xp.logaddexp(xp.zeros((), x.dtype), -x))

    def backward(self, gy):
        y = self.outputs[0]()
        return gy * y * (1 - y)


def sigmoid(x):
    """1 / (1 + exp(-x)), stable for large |x|."""
    return Sigmoid()(x)


class Softplus(Function):
    def forward(self, x):
        xp = xp_of(x)
        return xp.logaddexp(xp.zeros((), x.dtype), x)

    def backward(self, gy):
        return gy * sigmoid(self.inputs[0])


def softplus(x):
    """log(1 + exp(x)), stable for large |x| (no overflow at x = 1000)."""
    return Softplus()(x)


def _log_softmax_array(x, axis):
    xp = xp_of(x)
    m = x.max(axis=axis, keepdims=True)
    z = x - m
    lse = xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
    z -= lse
    return z


class Softmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        return xp_of(x).exp(_log_softmax_array(x, self.axis))

    def backward(self, gy):
        y = self.outputs[0]()
        return y * (gy - _sum(gy * y, axis=self.axis, keepdims=True))


def softmax(x, axis):
    """exp(x) / sum(exp(x), axis): the loss family's own softmax."""
    return Softmax(axis)(x)


class LogSoftmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        return _log_softmax_array(x, self.axis)

    def backward(self, gy):
        y = self.outputs[0]()
        return gy - exp(y) * _sum(gy, axis=self.axis, keepdims=True)


def log_softmax(x, axis):
    """x - logsumexp(x, axis), computed stably: the loss family's own log-softmax."""
    return LogSoftmax(axis)(x)


class PNorm(Function):
    """||x||_p over one axis (p > 0 finite, or inf), keeping that axis."""

    def __init__(self, p, axis):
        self.p = p
        self.axis = axis

    def forward(self, x):
        xp = xp_of(x)
        a = xp.abs(x)
        if self.p == math.inf:
            return a.max(axis=self.axis, keepdims=True)
        if self.p == 2:
            return xp.sqrt((x * x).sum(axis=self.axis, keepdims=True))
        if self.p == 1:
            return a.sum(axis=self.axis, keepdims=True)
        return (a ** self.p).sum(axis=self.axis, keepdims=True) ** (1.0 / self.p)

    def backward(self, gy):
        x = self.inputs[0]
        n = self.outputs[0]()
        xp = xp_of(x.data)
        sign = xp.sign(x.data)
        if self.p == 1:
            return gy * constant(sign)
        if self.p == math.inf:
            # PyTorch splits the gradient evenly among the entries that reach the max.
            hit = (xp.abs(x.data) == n.data).astype(x.dtype)
            return gy * constant(sign * hit / hit.sum(axis=self.axis, keepdims=True))
        # Where the norm is 0 every x is 0 and so is the gradient: divide by 1 there.
        safe_n = n + constant((n.data == 0).astype(n.dtype))
        if self.p == 2:
            return gy * x / safe_n
        return gy * constant(sign) * (absolute(x) / safe_n) ** (self.p - 1)


def pnorm(x, p, axis):
    """The p-norm of ``x`` over ``axis`` (kept as a size-1 axis); 0 gradient at 0."""
    if not isinstance(x, Variable):
        x = constant(x)
    return PNorm(p, axis)(x)
