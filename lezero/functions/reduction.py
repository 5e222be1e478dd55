"""Reductions: sum, mean, max, ... over ``axis`` with ``keepdims`` (NumPy names)."""
from lezero.core import Function
from lezero.functions._utils import data_of, keepdims_shape, normalize_axes
from lezero.functions.registry import register
from lezero.functions.shape import broadcast_to, reshape

__all__ = ["sum"]


class Sum(Function):
    def __init__(self, axis, keepdims):
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, x):
        self.x_shape = x.shape
        return x.sum(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        if not self.keepdims:
            gy = reshape(gy, keepdims_shape(self.x_shape, self.axis))
        return broadcast_to(gy, self.x_shape)


@register("reduction")
def sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (an int, a tuple, or None for all)."""
    axis = normalize_axes("sum", axis, data_of(x).ndim)
    return Sum(axis, keepdims)(x)
