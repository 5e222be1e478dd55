"""Order statistics and logical reductions: max min argmax argmin all any topk.

``max`` and ``min`` reduce like ``numpy.max`` (values only).  Their gradient follows
``torch.amax``/``torch.amin``: when several elements tie for the extreme, they share the
gradient evenly (k ties get 1/k each).  ``argmax``, ``argmin``, ``all`` and ``any`` return
constants; ``topk`` returns (values, indices) like ``torch.topk``, with constant indices.
"""
import collections

import numpy as np

from lezero.core import Function
from lezero.functions.common import as_variable, xp_of
from lezero.functions.reduction.basic import (check_nonempty, expand, keepdims_shape,
                                              reduce_args)
from lezero.functions.registry import register
from lezero.utils.checks import check_axis, check_bool

__all__ = ["max", "min", "argmax", "argmin", "all", "any", "topk"]


class MaxMin(Function):
    """max (``largest``) or min over ``axis``; ties share the gradient evenly."""

    def __init__(self, axis, keepdims, largest):
        self.axis = axis
        self.keepdims = keepdims
        self.largest = largest

    def forward(self, x):
        if self.largest:
            return x.max(axis=self.axis, keepdims=self.keepdims)
        return x.min(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        x = self.inputs[0]
        xp = xp_of(x.data)
        y = self.outputs[0]().data.reshape(keepdims_shape(x.shape, self.axis))
        hit = x.data == y
        count = xp.maximum(hit.sum(axis=self.axis, keepdims=True), 1)   # >= 1 unless NaN
        share = as_variable(hit.astype(gy.dtype) / count.astype(gy.dtype))
        return expand(gy, x.shape, self.axis, self.keepdims) * share


@register("reduction", notes="ties share the gradient evenly (torch.amax)")
def max(x, axis=None, keepdims=False):
    """Maximum over ``axis`` (``numpy.max``; values only, see ``topk`` for indices).

    Elements that tie for the maximum share its gradient evenly, as ``torch.amax``.
    """
    x, axes = reduce_args("max", x, axis, keepdims, kinds="iuf")
    check_nonempty("max", x, axes)
    return MaxMin(axes, keepdims, True)(x)


@register("reduction", notes="ties share the gradient evenly (torch.amin)")
def min(x, axis=None, keepdims=False):
    """Minimum over ``axis`` (``numpy.min``); ties share the gradient evenly (torch.amin)."""
    x, axes = reduce_args("min", x, axis, keepdims, kinds="iuf")
    check_nonempty("min", x, axes)
    return MaxMin(axes, keepdims, False)(x)


class Reduce(Function):
    """A non-differentiable reduction ``xp.<name>(x, axis=..., keepdims=...)``."""

    def __init__(self, name, axis, keepdims):
        self.name = name
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        return getattr(xp_of(x), self.name)(x, axis=self.axis, keepdims=self.keepdims)


def _arg_reduction(op, x, axis, keepdims):
    if isinstance(axis, bool) or (axis is not None and not isinstance(axis, (int, np.integer))):
        raise TypeError(f"{op}: axis must be an int or None, got {type(axis).__name__}")
    x, axes = reduce_args(op, x, axis, keepdims, kinds="biuf")
    check_nonempty(op, x, axes)
    axis = None if axes is None else axes[0]
    if x.ndim == 0:                 # NumPy: the index into the flattened 0-d array
        return as_variable(xp_of(x.data).zeros((), np.int64))
    return Reduce(op, axis, keepdims)(as_variable(x.data))


@register("reduction", differentiable=False, notes="first index on ties")
def argmax(x, axis=None, keepdims=False):
    """Index of the maximum along ``axis`` (of the flattened input when None); int64, a
    constant.  Ties give the first index, as NumPy and PyTorch."""
    return _arg_reduction("argmax", x, axis, keepdims)


@register("reduction", differentiable=False, notes="first index on ties")
def argmin(x, axis=None, keepdims=False):
    """Index of the minimum along ``axis``; int64, a constant; ties give the first index."""
    return _arg_reduction("argmin", x, axis, keepdims)


@register("reduction", differentiable=False)
def all(x, axis=None, keepdims=False):
    """True where every element along ``axis`` is nonzero (a boolean constant)."""
    x, axes = reduce_args("all", x, axis, keepdims)
    return Reduce("all", axes, keepdims)(as_variable(x.data))


@register("reduction", differentiable=False)
def any(x, axis=None, keepdims=False):
    """True where some element along ``axis`` is nonzero (a boolean constant)."""
    x, axes = reduce_args("any", x, axis, keepdims)
    return Reduce("any", axes, keepdims)(as_variable(x.data))


# ----- topk ---------------------------------------------------------------------------------

def _put_along_axis(out, indices, values, axis):
    """out[..., indices[..., j], ...] = values[..., j, ...] along ``axis`` (unique indices).

    Written with reshapes and flat indexing only, so it runs on NumPy and CuPy alike.
    """
    xp = xp_of(out)
    if indices.size == 0:
        return out
    o = xp.moveaxis(out, axis, -1)
    i = xp.moveaxis(indices, axis, -1).reshape(-1, indices.shape[axis])
    v = xp.moveaxis(values, axis, -1).reshape(i.shape)
    n = o.shape[-1]
    flat = o.reshape(-1)          # a copy when o is not contiguous: it is what we return
    rows = xp.arange(i.shape[0]).reshape(-1, 1) * n
    flat[(i + rows).reshape(-1)] = v.reshape(-1)
    return xp.moveaxis(flat.reshape(o.shape), -1, axis)


class GatherAlong(Function):
    """y = take_along_axis(x, indices, axis); its gradient scatters back."""

    def __init__(self, indices, axis):
        self.indices = indices
        self.axis = axis

    def forward(self, x):
        self.x_shape = x.shape
        return xp_of(x).take_along_axis(x, self.indices, axis=self.axis)

    def backward(self, gy):
        return ScatterAlong(self.indices, self.axis, self.x_shape)(gy)


class ScatterAlong(Function):
    """Zeros of ``shape`` with ``x`` put at ``indices`` along ``axis`` (unique indices)."""

    def __init__(self, indices, axis, shape):
        self.indices = indices
        self.axis = axis
        self.shape = shape

    def forward(self, x):
        xp = xp_of(x)
        out = xp.zeros(self.shape, dtype=x.dtype)
        return _put_along_axis(out, self.indices, x, self.axis)

    def backward(self, gy):
        return GatherAlong(self.indices, self.axis)(gy)


def _topk_indices(x, k, axis, largest, sorted):
    """The indices of the k largest (or smallest) entries along ``axis``."""
    xp = xp_of(x)
    n = x.shape[axis]
    if k == 0:
        shape = list(x.shape)
        shape[axis] = 0
        return xp.zeros(shape, dtype=np.int64)
    # argpartition puts the k wanted entries in one end without a full sort: O(n).
    if largest:
        idx = xp.argpartition(x, n - k, axis=axis)
        idx = xp.take(idx, xp.arange(n - k, n), axis=axis)
    else:
        idx = xp.argpartition(x, k - 1, axis=axis)
        idx = xp.take(idx, xp.arange(k), axis=axis)
    if sorted:
        order = xp.argsort(xp.take_along_axis(x, idx, axis=axis), axis=axis)
        if largest:
            order = xp.flip(order, axis)
        idx = xp.take_along_axis(idx, order, axis=axis)
    return idx.astype(np.int64)


TopKResult = collections.namedtuple("TopKResult", ["values", "indices"])


@register("reduction", notes="indices are constants")
def topk(x, k, axis=-1, largest=True, sorted=True):
    """The ``k`` largest (``largest=False``: smallest) entries along ``axis``, like
    ``torch.topk``: returns ``(values, indices)``; values are differentiable (the gradient
    goes to the selected positions), indices are an int64 constant.  With ``sorted`` the
    values are in descending (ascending for smallest) order.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__}")
    check_bool("topk", "largest", largest)
    check_bool("topk", "sorted", sorted)
    x, _ = reduce_args("topk", x, None, False, kinds="iuf")
    if x.ndim == 0:
        raise ValueError("topk: x must have at least 1 dimension, got a 0-d input")
    axis = check_axis("topk", axis, x.ndim)
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for axis {axis} of size {n} "
                         f"(input shape {x.shape})")
    idx = _topk_indices(x.data, int(k), axis, bool(largest), bool(sorted))
    return TopKResult(GatherAlong(idx, axis)(x), as_variable(idx))
