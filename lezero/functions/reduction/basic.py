"""Sums and moments: sum mean var std logsumexp, and the helpers every reduction shares.

Reductions take NumPy's arguments: ``axis`` (an int, a tuple of ints, or None for all axes)
and ``keepdims``.  Their backward broadcasts the output gradient back over the reduced axes
(``expand``) and is written with LeZero operators, so it can be differentiated again.
"""
import math

import numpy as np

from lezero.core import Function
from lezero.functions.common import as_variable, operands, xp_of
from lezero.functions.math import exp, sqrt
from lezero.functions.registry import register
from lezero.functions.shape import broadcast_to, reshape
from lezero.utils.checks import check_axes, check_bool

__all__ = ["sum", "mean", "var", "std", "logsumexp"]


def reduce_args(op, x, axis, keepdims, kinds="biuf"):
    """Validate a reduction's arguments; return (x as a Variable, sorted axes tuple or None).

    A 0-d input has nothing to reduce over, so any valid axis means "all" there (as in
    PyTorch, where dim=0 and dim=-1 are accepted for scalars).
    """
    (x,) = operands(op, ("x",), (x,), kinds)
    check_bool(op, "keepdims", keepdims)
    axes = check_axes(op, axis, x.ndim)
    if x.ndim == 0:
        axes = None
    return x, axes


def keepdims_shape(shape, axes):
    """The shape a reduction over ``axes`` has with keepdims=True."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def reduced_shape(shape, axes):
    """The shape a reduction over ``axes`` (all axes when None) has without keepdims."""
    if axes is None:
        return ()
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def reduced_size(shape, axes):
    """How many elements each output element of a reduction over ``axes`` combines."""
    if axes is None:
        return math.prod(shape)
    return math.prod(shape[a] for a in axes)


def check_nonempty(op, x, axes):
    """ValueError when a reduction with no identity (max, mean, ...) sees zero elements."""
    if reduced_size(x.shape, axes) == 0:
        raise ValueError(f"{op}: cannot reduce over zero elements (input shape {x.shape}, "
                         f"axis {axes})")


def expand(g, x_shape, axes, keepdims):
    """Broadcast a reduction's output gradient ``g`` back to the input shape."""
    if not keepdims:
        g = reshape(g, keepdims_shape(x_shape, axes))
    return broadcast_to(g, x_shape)


def expand_array(g, x_shape, axes, keepdims):
    """``expand`` on arrays, for a first-order backward (``backward_arrays``): the
    broadcast view itself, without the two Function calls of a differentiable result
    (docs/performance.md, "A first-order sum's gradient")."""
    if not keepdims:
        g = g.reshape(keepdims_shape(x_shape, axes))
    return xp_of(g).broadcast_to(g, x_shape)


class Sum(Function):
    save_inputs, reads_outputs = (), False      # the gradient needs the shape only

    def __init__(self, axis, keepdims):
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        self.x_shape = x.shape
        return x.sum(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        return expand(gy, self.x_shape, self.axis, self.keepdims)

    def backward_arrays(self, gy):
        return expand_array(gy, self.x_shape, self.axis, self.keepdims)


@register("reduction")
def sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (an int, a tuple, or None for all)."""
    x, axes = reduce_args("sum", x, axis, keepdims)
    return Sum(axes, keepdims)(x)


class Mean(Function):
    save_inputs, reads_outputs = (), False

    def __init__(self, axis, keepdims):
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        return x.mean(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        x = self.inputs[0]
        n = reduced_size(x.shape, self.axis)
        return expand(gy * (1.0 / n), x.shape, self.axis, self.keepdims)

    def backward_arrays(self, gy):
        x = self.inputs[0]
        n = reduced_size(x.shape, self.axis)
        return expand_array(gy * (1.0 / n), x.shape, self.axis, self.keepdims)


@register("reduction")
def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (floating point input)."""
    x, axes = reduce_args("mean", x, axis, keepdims, kinds="f")
    check_nonempty("mean", x, axes)
    return Mean(axes, keepdims)(x)


class Var(Function):
    def __init__(self, axis, ddof, keepdims):
        self.axis = axis
        self.ddof = ddof
        self.keepdims = keepdims

    def forward(self, x):
        return xp_of(x).var(x, axis=self.axis, ddof=self.ddof, keepdims=self.keepdims)

    def backward(self, gy):
        x = self.inputs[0]
        n = reduced_size(x.shape, self.axis)
        centred = x - mean(x, self.axis, keepdims=True)
        return expand(gy, x.shape, self.axis, self.keepdims) * centred * (2.0 / (n - self.ddof))


def _check_ddof(op, ddof, n):
    if isinstance(ddof, bool) or not isinstance(ddof, (int, np.integer)):
        raise TypeError(f"{op}: ddof must be an int, got {type(ddof).__name__}")
    if ddof < 0:
        raise ValueError(f"{op}: ddof must be >= 0, got {ddof}")
    if n - ddof <= 0:
        raise ValueError(f"{op}: ddof={ddof} leaves no degrees of freedom for {n} element(s) "
                         "per reduction")


@register("reduction", notes="ddof=0 by default (NumPy); torch's default is correction=1")
def var(x, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis``: mean((x - mean(x))**2) * n / (n - ddof).

    ``ddof=0`` (NumPy's default) is the population variance; PyTorch's ``torch.var``
    defaults to the sample variance, which is ``ddof=1`` here.
    """
    x, axes = reduce_args("var", x, axis, keepdims, kinds="f")
    _check_ddof("var", ddof, reduced_size(x.shape, axes))
    return Var(axes, int(ddof), keepdims)(x)


@register("reduction", notes="ddof=0 by default (NumPy); torch's default is correction=1")
def std(x, axis=None, ddof=0, keepdims=False):
    """Standard deviation, sqrt(var(x, axis, ddof)); ``ddof=0`` by default as in NumPy
    (PyTorch's ``torch.std`` defaults to ``ddof=1``).  Its gradient is infinite where
    the variance is 0."""
    x, axes = reduce_args("std", x, axis, keepdims, kinds="f")
    _check_ddof("std", ddof, reduced_size(x.shape, axes))
    return sqrt(Var(axes, int(ddof), keepdims)(x))


class LogSumExp(Function):
    def __init__(self, axis, keepdims):
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        xp = xp_of(x)
        # Shift by the maximum so exp never overflows; an infinite maximum is not a
        # usable shift (inf - inf = nan), and the unshifted sum gives the right inf there.
        m = x.max(axis=self.axis, keepdims=True)
        self.shift = m = xp.where(xp.isfinite(m), m, 0)
        with np.errstate(divide="ignore"):    # log(0) = -inf when every term is -inf
            y = xp.log(xp.exp(x - m).sum(axis=self.axis, keepdims=True)) + m
        return y if self.keepdims else y.reshape(reduced_shape(x.shape, self.axis))

    def backward(self, gy):
        # The gradient is softmax(x).  Computed as e / sum(e) with e = exp(x - shift) it is
        # accurate in float32 (exp(x - y) would carry y's rounding, ~1e-5 near |y| = 1000),
        # and since the constant shift cancels, it is still exact to differentiate again.
        x = self.inputs[0]
        e = exp(x - as_variable(self.shift))
        softmax = e / broadcast_to(sum(e, self.axis, keepdims=True), x.shape)
        return expand(gy, x.shape, self.axis, self.keepdims) * softmax


@register("reduction", notes="stable: shifted by the maximum")
def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis``, computed without overflow (shifted by the max).

    Its gradient is softmax(x) along the reduced axes.  ``axis=None`` reduces everything
    (``torch.logsumexp`` needs ``dim``).
    """
    x, axes = reduce_args("logsumexp", x, axis, keepdims, kinds="f")
    check_nonempty("logsumexp", x, axes)
    return LogSumExp(axes, keepdims)(x)
