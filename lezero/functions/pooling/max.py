"""Pooling operators with ``torch.nn.functional``'s names, arguments and layouts.

Inputs are ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``) for the 3-D ops,
``(N, C, H, W)`` (or ``(C, H, W)``) for the 2-D ops and ``(N, C, L)`` (or ``(C, L)``) for
the 1-D ops, which run as 2-D ops over a height of one.

Max pooling keeps the flat index ``h * W + w`` (``(d * H + h) * W + w`` in 3-D) of each
window's maximum (PyTorch's ``return_indices``); its gradient scatters into those
positions and the gradient of that is a gather, so max pooling is differentiable twice.
Average pooling is linear: its backward is its transpose, whose backward is average
pooling again.

Adaptive pooling lives in ``pooling_adaptive``, resizing (``interpolate``,
``pixel_shuffle``) in ``pooling_resize``; they are re-exported here.
"""
import functools

import numpy as np

from lezero.core import Function, Variable
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.math import mul, pow
from lezero.functions.pooling import adaptive as _adaptive, resize as _resize
from lezero.functions.pooling.adaptive import *   # noqa: F401,F403  (re-exported)
from lezero.functions.pooling.common import IndexGather, IndexScatter, as_4d, geometry, int_tuple
from lezero.functions.pooling.resize import *     # noqa: F401,F403  (re-exported)
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.kernels import pooling as pool_kernels
from lezero.utils.checks import check_array, check_float_array

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "lp_pool1d", "lp_pool2d",
           "max_unpool1d", "max_unpool2d"] + _adaptive.__all__ + _resize.__all__


# ----- max pooling -------------------------------------------------------------------------

class MaxPoolNd(Function):
    """Max pooling over (N, C, H, W) or (N, C, D, H, W); ``indices`` holds each maximum's
    flat position."""

    def __init__(self, geom):
        self.geom = geom

    def forward(self, x):
        g = self.geom
        rows = x.shape[0] * x.shape[1]
        y, idx = pool_kernels.max_pool(x.reshape((rows,) + x.shape[2:]), g.kernel, g.stride,
                                       g.padding, g.dilation, g.out_size)
        self.indices = idx.reshape(x.shape[:2] + g.out_size)
        return y.reshape(x.shape[:2] + g.out_size)

    def backward(self, gy):
        return IndexScatter(self.indices, self.inputs[0].shape)(gy)


def _max_pool(op, dims, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    shape4, restore = as_4d(op, x, dims)
    geom = geometry(op, shape4, kernel_size, stride, padding, dilation, ceil_mode, dims)
    f = MaxPoolNd(geom)
    y = restore(f(reshape(x, shape4)))
    if return_indices:
        return y, Variable(restore(f.indices), requires_grad=False)
    return y


@register("pooling", kernels=("numpy", "cupy", "numba"))
def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling of (N, C, H, W) or (C, H, W); ``stride`` defaults to ``kernel_size``.

    With ``return_indices=True`` also returns the int64 flat indices ``h * W + w`` of the
    maxima (for ``max_unpool2d``).  Ties go to the first maximum, as in PyTorch.
    """
    return _max_pool("max_pool2d", 2, x, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


@register("pooling", kernels=("numpy", "cupy", "numba"))
def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling of (N, C, L) or (C, L); indices are positions along L."""
    return _max_pool("max_pool1d", 1, x, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


@register("pooling")
def max_pool3d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling of (N, C, D, H, W) or (C, D, H, W); ``stride`` defaults to
    ``kernel_size``.  Indices are the flat positions ``(d * H + h) * W + w``."""
    return _max_pool("max_pool3d", 3, x, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


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
    if not isinstance(count_include_pad, (bool, np.bool_)):
        raise TypeError(f"{op}: count_include_pad must be a bool, got {count_include_pad!r}")
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not isinstance(divisor_override,
                                                                (int, np.integer)):
            raise TypeError(f"{op}: divisor_override must be an int, got {divisor_override!r}")
        if divisor_override == 0:
            raise ValueError(f"{op}: divisor_override must be non-zero, got 0")
        divisor = np.full(geom.out_size, float(divisor_override))
    else:
        counts = [_window_counts(*a, count_include_pad) for a in
                  zip(geom.in_size, geom.out_size, geom.kernel, geom.stride, geom.padding)]
        divisor = functools.reduce(np.multiply.outer, counts).astype(np.float64)
    divisor = xp_of(x).asarray(divisor)
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
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float, np.number)):
        raise TypeError(f"{op}: norm_type must be a number, got {norm_type!r}")
    if norm_type == 0:
        raise ValueError(f"{op}: norm_type must be non-zero, got {norm_type}")
    check_float_array(op, "x", x)
    x = as_variable(x)     # a Variable, so the Python-number exponent keeps x's dtype
    kernel = int_tuple(op, "kernel_size", kernel_size, dims, 1)
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


# ----- max unpooling -------------------------------------------------------------------------

class MaxUnpool2d(Function):
    """Place each value at its flat index in zeros of ``out_shape`` (the partial inverse
    of max pooling); the gradient gathers from those positions."""

    def __init__(self, indices, out_shape):
        self.indices = indices
        self.out_shape = out_shape

    def forward(self, x):
        xp = xp_of(x)
        rows = x.shape[0] * x.shape[1]
        size = int(np.prod(self.out_shape[2:]))
        flat = self.indices.reshape(rows, -1) + (xp.arange(rows) * size)[:, None]
        y = xp.zeros(rows * size, dtype=x.dtype)
        y[flat.ravel()] = x.ravel()      # assignment, as PyTorch: repeated indices keep one
        return y.reshape(self.out_shape)

    def backward(self, gy):
        return IndexGather(self.indices)(gy)


def _max_unpool(op, dims, x, indices, kernel_size, stride, padding, output_size):
    shape4, restore = as_4d(op, x, dims)
    idx = check_array(op, "indices", indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got dtype {idx.dtype}")
    if idx.shape != data_of(x).shape:
        raise ValueError(f"{op}: indices shape {idx.shape} must equal the input shape "
                         f"{data_of(x).shape}")
    kernel = int_tuple(op, "kernel_size", kernel_size, dims, 1)
    stride = kernel if stride is None else int_tuple(op, "stride", stride, dims, 1)
    padding = int_tuple(op, "padding", padding, dims, 0)
    in_size = shape4[-dims:]
    default = tuple((i - 1) * s + k - 2 * p for i, s, k, p in zip(in_size, stride, kernel,
                                                                  padding))
    if output_size is None:
        out = default
    else:
        out = tuple(int(v) for v in output_size)
        if len(out) == dims + 2 or (len(out) == dims + 1 and data_of(x).ndim == dims + 1):
            out = out[-dims:]
        if len(out) != dims or any(not d - s < o < d + s for o, d, s in zip(out, default,
                                                                              stride)):
            raise ValueError(f"{op}: output_size {tuple(output_size)} is invalid; expected "
                             f"{dims} sizes within the stride {stride} of {default}")
    if min(out) < 1:
        raise ValueError(f"{op}: output size {out} is empty")
    size = int(np.prod(out))
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
        raise ValueError(f"{op}: indices must lie in [0, {size}) for output size {out}, got "
                         f"values in [{int(idx.min())}, {int(idx.max())}]")
    out4 = shape4[:2] + ((1,) if dims == 1 else ()) + out
    f = MaxUnpool2d(idx.reshape(shape4).astype(np.int64, copy=False), out4)
    return restore(f(reshape(x, shape4)))


@register("pooling")
def max_unpool2d(x, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Scatter (N, C, H, W) values back to the positions ``max_pool2d`` took them from;
    the rest of the (N, C, OH, OW) output is zero."""
    return _max_unpool("max_unpool2d", 2, x, indices, kernel_size, stride, padding,
                       output_size)


@register("pooling")
def max_unpool1d(x, indices, kernel_size, stride=None, padding=0, output_size=None):
    """1-D ``max_unpool2d`` for (N, C, L) or (C, L)."""
    return _max_unpool("max_unpool1d", 1, x, indices, kernel_size, stride, padding,
                       output_size)

