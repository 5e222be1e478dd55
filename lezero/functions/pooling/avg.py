"""Average pooling (avg_pool1d/2d/3d) and power-average pooling (lp_pool1d/2d), with
``torch.nn.functional``'s names, arguments and layouts.

Average pooling is linear: its backward is its transpose (``AvgPoolNdGrad``, spreading
each output's gradient over its window), whose backward is average pooling again, so it
differentiates to any order.  The divisor follows PyTorch (``count_include_pad``,
``divisor_override``, clipped ceil-mode windows).
"""
import functools

import numpy as np

from lezero.backends import get_backend
from lezero.core import Function
from lezero.functions.common import as_variable, xp_of
from lezero.functions.math import mul, pow
from lezero.functions.pooling.common import as_4d, geometry
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_bool, check_float_array, check_int, check_number, ntuple

__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "lp_pool1d", "lp_pool2d"]


# ----- average pooling ---------------------------------------------------------------------

def _window_counts(size, out, k, s, p, include_pad):
    """PyTorch's average-pool divisor along one axis: the window clipped to the padded
    input (include_pad) or to the input itself."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


class AvgPoolNd(Function):
    """Average pooling over (N, C, H, W) or (N, C, D, H, W) with a precomputed divisor
    of the output's spatial shape."""

    def __init__(self, geom, divisor):
        self.geom = geom
        self.divisor = divisor

    def forward(self, x):
        g = self.geom
        xp = xp_of(x)
        xpad = xp.zeros(x.shape[:2] + g.padded_shape(), dtype=x.dtype)
        xpad[g.interior()] = x
        acc = None
        for sl in g.taps():
            acc = xpad[sl].copy() if acc is None else acc + xpad[sl]
        return acc / xp.asarray(self.divisor, dtype=x.dtype)

    def backward(self, gy):
        return AvgPoolNdGrad(self.geom, self.divisor, self.inputs[0].shape)(gy)


class AvgPoolNdGrad(Function):
    """The transpose of ``AvgPoolNd``: spread each output's gradient over its window."""

    def __init__(self, geom, divisor, x_shape):
        self.geom = geom
        self.divisor = divisor
        self.x_shape = x_shape

    def forward(self, gy):
        g = self.geom
        xp = xp_of(gy)
        share = gy / xp.asarray(self.divisor, dtype=gy.dtype)
        gpad = xp.zeros(gy.shape[:2] + g.padded_shape(), dtype=gy.dtype)
        for sl in g.taps():
            gpad[sl] += share
        return gpad[g.interior()].copy()

    def backward(self, ggx):
        return AvgPoolNd(self.geom, self.divisor)(ggx)


def _avg_pool(op, dims, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    shape4, restore = as_4d(op, x, dims)
    geom = geometry(op, shape4, kernel_size, stride, padding, 1, ceil_mode, dims)
    check_bool(op, "count_include_pad", count_include_pad)
    if divisor_override is not None:
        if check_int(op, "divisor_override", divisor_override) == 0:
            raise ValueError(f"{op}: divisor_override must be non-zero, got 0")
        divisor = np.full(geom.out_size, float(divisor_override))
    else:
        counts = [_window_counts(*a, count_include_pad) for a in
                  zip(geom.in_size, geom.out_size, geom.kernel, geom.stride, geom.padding)]
        divisor = functools.reduce(np.multiply.outer, counts).astype(np.float64)
    backend = get_backend(x)        # a float32-only device holds no float64 divisor
    divisor = backend.from_host(divisor.astype(backend.capabilities.widest_float, copy=False))
    return restore(AvgPoolNd(geom, divisor)(reshape(x, shape4)))


@register("pooling")
def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-D average pooling of (N, C, H, W) or (C, H, W), with PyTorch's divisor rules:
    padding counts when ``count_include_pad``; ``divisor_override`` replaces the divisor."""
    return _avg_pool("avg_pool2d", 2, x, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


@register("pooling")
def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-D average pooling of (N, C, D, H, W) or (C, D, H, W), with ``avg_pool2d``'s
    divisor rules (``count_include_pad``, ``divisor_override``)."""
    return _avg_pool("avg_pool3d", 3, x, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


@register("pooling")
def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-D average pooling of (N, C, L) or (C, L)."""
    return _avg_pool("avg_pool1d", 1, x, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


# ----- power-average pooling ---------------------------------------------------------------

def _lp_pool(op, dims, x, norm_type, kernel_size, stride, ceil_mode):
    if check_number(op, "norm_type", norm_type) == 0:
        raise ValueError(f"{op}: norm_type must be non-zero, got {norm_type}")
    check_float_array(op, "x", x)
    x = as_variable(x)     # a Variable, so the Python-number exponent keeps x's dtype
    kernel = ntuple(op, "kernel_size", kernel_size, dims, low=1)
    avg = _avg_pool(op, dims, pow(x, float(norm_type)), kernel, stride, 0, ceil_mode, True,
                    None)
    # (sum over the window of x ** p) ** (1 / p), the window sum being the average times
    # the kernel area, as PyTorch computes it (also for clipped ceil-mode windows).
    return pow(mul(avg, float(np.prod(kernel))), 1.0 / float(norm_type))


@register("pooling")
def lp_pool2d(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    """2-D power-average pooling: ``(sum over the window of x ** p) ** (1 / p)``."""
    return _lp_pool("lp_pool2d", 2, x, norm_type, kernel_size, stride, ceil_mode)


@register("pooling")
def lp_pool1d(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    """1-D power-average pooling of (N, C, L) or (C, L)."""
    return _lp_pool("lp_pool1d", 1, x, norm_type, kernel_size, stride, ceil_mode)
