"""Products and running totals: prod cumsum cumprod.

A product's gradient is "the product of the other elements".  Without zeros that is
y / x; with zeros y / x is 0 / 0, so the gradient is then built from exclusive running
products (prod) or from running products with one element left out (cumprod), exactly as
PyTorch handles zeros.  Everything is written with LeZero operators, so these gradients can
be differentiated again.
"""
from lezero.core import Function
from lezero.functions.common import as_variable, inverse_permutation, xp_of
from lezero.functions.math import where
from lezero.functions.reduction.basic import expand, reduce_args
from lezero.functions.reduction.basic import sum as sum_
from lezero.functions.registry import register
from lezero.functions.shape import get_item, reshape, transpose
from lezero.utils.checks import check_axis

__all__ = ["prod", "cumsum", "cumprod"]


def _has_zero(x):
    return bool((x.data == 0).any())


def _flip_last(x):
    return get_item(x, (Ellipsis, slice(None, None, -1)))


def _to_last(x, axes):
    """Move ``axes`` to the end and flatten them into one: (..., n); also return the
    permutation and the permuted shape, to undo it with ``_from_last``."""
    perm = [i for i in range(x.ndim) if i not in axes] + list(axes)
    xt = transpose(x, tuple(perm)) if perm != list(range(x.ndim)) else x
    kept = xt.ndim - len(axes)
    return reshape(xt, xt.shape[:kept] + (-1,)), perm, xt.shape


def _from_last(y, perm, shape):
    y = reshape(y, shape)
    if perm == list(range(len(perm))):
        return y
    return transpose(y, inverse_permutation(perm))


def _exclusive_cumprod_last(x):
    """out[..., i] = prod(x[..., :i]) (1 for i = 0), along the last axis."""
    n = x.shape[-1]
    xp = xp_of(x.data)
    before = xp.maximum(xp.arange(n) - 1, 0)        # [0, 0, 1, ..., n-2]
    shifted = get_item(cumprod(x, axis=-1), (Ellipsis, before))
    first = xp.arange(n) == 0
    return where(first, 1.0, shifted)


def _prod_of_others(x, axes):
    """For each element, the product of the other elements of its reduction slice."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    flat, perm, shape = _to_last(x, axes)
    left = _exclusive_cumprod_last(flat)
    right = _flip_last(_exclusive_cumprod_last(_flip_last(flat)))
    return _from_last(left * right, perm, shape)


class Prod(Function):
    def __init__(self, axis, keepdims):
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        return x.prod(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        x = self.inputs[0]
        if not _has_zero(x):
            y = self.outputs[0]()
            return expand(gy * y, x.shape, self.axis, self.keepdims) / x
        return expand(gy, x.shape, self.axis, self.keepdims) * _prod_of_others(x, self.axis)


@register("reduction", notes="gradient exact at zeros")
def prod(x, axis=None, keepdims=False):
    """Product over ``axis``; its gradient is exact where elements are 0 (as PyTorch)."""
    x, axes = reduce_args("prod", x, axis, keepdims)
    return Prod(axes, keepdims)(x)


def _cumulative_args(op, x, axis):
    """Validate (x, axis); flatten x when axis is None (NumPy).  Return (x, axis)."""
    x, _ = reduce_args(op, x, None, False)
    if axis is None:
        return (reshape(x, (-1,)) if x.ndim != 1 else x), 0
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d input has no axis {axis}; use axis=None")
    return x, check_axis(op, axis, x.ndim)


class CumSum(Function):
    """Running sum along ``axis``; ``reverse`` sums from the end (its own gradient)."""

    def __init__(self, axis, reverse=False):
        self.axis = axis
        self.reverse = reverse

    def forward(self, x):
        xp = xp_of(x)
        if self.reverse:
            return xp.flip(xp.flip(x, self.axis).cumsum(axis=self.axis), self.axis)
        return x.cumsum(axis=self.axis)

    def backward(self, gy):
        return CumSum(self.axis, not self.reverse)(gy)


@register("reduction")
def cumsum(x, axis=None):
    """Running sum along ``axis`` (over the flattened input when None, as NumPy)."""
    x, axis = _cumulative_args("cumsum", x, axis)
    return CumSum(axis)(x)


class CumProd(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        return x.cumprod(axis=self.axis)

    def backward(self, gy):
        x = self.inputs[0]
        if not _has_zero(x):
            # d/dx_i sum_k g_k y_k = sum_{k >= i} g_k y_k / x_i
            return CumSum(self.axis, reverse=True)(gy * self.outputs[0]()) / x
        return _cumprod_grad_with_zeros(gy, x, self.axis)


def _cumprod_grad_with_zeros(gy, x, axis):
    """sum_{k >= i} g_k * prod_{j <= k, j != i} x_j, built from n running products of x
    with one element set to 1 (O(n^2) memory per slice; used only when x has zeros)."""
    flat, perm, shape = _to_last(x, (axis,))
    g, _, _ = _to_last(gy, (axis,))
    n = flat.shape[-1]
    xp = xp_of(x.data)
    rows = reshape(flat, flat.shape[:-1] + (1, n))
    left_out = where(xp.eye(n, dtype=bool), 1.0, rows)     # row i: x with x_i = 1
    running = cumprod(left_out, axis=-1)                   # [i, k] = prod_{j<=k, j!=i} x_j
    later = as_variable(xp.triu(xp.ones((n, n), dtype=x.dtype)))   # [i, k] = 1 if k >= i
    gx = sum_(running * (later * reshape(g, g.shape[:-1] + (1, n))), axis=-1)
    return _from_last(gx, perm, shape)


@register("reduction", notes="gradient exact at zeros")
def cumprod(x, axis=None):
    """Running product along ``axis`` (flattened when None); exact gradient at zeros."""
    x, axis = _cumulative_args("cumprod", x, axis)
    return CumProd(axis)(x)
