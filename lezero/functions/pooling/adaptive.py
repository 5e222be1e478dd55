"""Adaptive pooling: the caller fixes the output size, the windows follow.

Output cell ``i`` of an axis of length ``n`` pooled to ``m`` covers input positions
``floor(i * n / m)`` up to ``ceil((i + 1) * n / m)`` (PyTorch's windows; they may overlap).

* Average: a box's mean is separable, so ``y = A_h @ x @ A_w.T`` with small constant
  averaging matrices (one more, along D, in 3-D) -- matmul's gradient (and its gradient)
  come for free.
* Max: the maximum over a box is the maximum over rows of the maximum over columns (and
  over depth of that, in 3-D); reducing the last axis first and the first axis last keeps
  PyTorch's choice among ties (the first maximum in row-major order).  The gradient
  scatters to the argmax.
"""
import numpy as np

from lezero.core import Function, Variable
from lezero.functions.common import as_variable, xp_of
from lezero.functions.linalg import matmul
from lezero.functions.pooling.common import IndexScatter, as_4d
from lezero.functions.registry import register
from lezero.functions.shape import reshape

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"]


def _output_size(op, output_size, in_size):
    """An int or a tuple (None keeps that input size) -> a tuple of positive ints."""
    n = len(in_size)
    if isinstance(output_size, (int, np.integer)) and not isinstance(output_size, bool):
        output_size = (output_size,) * n
    if not isinstance(output_size, (tuple, list)) or len(output_size) != n or any(
            o is not None and (isinstance(o, bool) or not isinstance(o, (int, np.integer)))
            for o in output_size):
        raise TypeError(f"{op}: output_size must be an int or a tuple of {n} ints or None, "
                        f"got {output_size!r}")
    out = tuple(s if o is None else int(o) for o, s in zip(output_size, in_size))
    if min(out) < 1:
        raise ValueError(f"{op}: output_size must be positive, got {tuple(output_size)}")
    return out


def _windows(size, out):
    """Start and end (exclusive) of each adaptive window along one axis."""
    i = np.arange(out)
    return (i * size) // out, -(-(i + 1) * size // out)


def _averaging_matrix(size, out, xp, dtype):
    """(out, size) matrix whose row i averages window i."""
    start, end = _windows(size, out)
    cols = np.arange(size)
    inside = (cols >= start[:, None]) & (cols < end[:, None])
    return xp.asarray(inside / (end - start)[:, None], dtype=dtype)


def _adaptive_avg(op, dims, x, output_size):
    shape4, restore = as_4d(op, x, dims)
    out = ((1,) if dims == 1 else ()) + _output_size(op, output_size, shape4[-dims:])
    xp, dtype = xp_of(x), x.dtype
    y = reshape(x, shape4)
    last = len(shape4) - 1
    for axis, (size, o) in enumerate(zip(shape4[2:], out), start=2):
        if o == size:
            continue
        mat = as_variable(_averaging_matrix(size, o, xp, dtype))
        if axis == last:
            y = matmul(y, mat.T)
        else:   # average along ``axis`` with the axes after it flattened into columns
            lead, rest = y.shape[:axis], y.shape[axis + 1:]
            y = matmul(mat, reshape(y, lead + (size, -1)))
            y = reshape(y, lead + (o,) + rest)
    return restore(y)


@register("pooling")
def adaptive_avg_pool2d(x, output_size):
    """Average pooling of (N, C, H, W) or (C, H, W) to ``output_size`` (an int, or a
    tuple in which None keeps that input size)."""
    return _adaptive_avg("adaptive_avg_pool2d", 2, x, output_size)


@register("pooling")
def adaptive_avg_pool1d(x, output_size):
    """Average pooling of (N, C, L) or (C, L) to length ``output_size``."""
    return _adaptive_avg("adaptive_avg_pool1d", 1, x, output_size)


@register("pooling")
def adaptive_avg_pool3d(x, output_size):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size`` (an int, or a
    tuple in which None keeps that input size)."""
    return _adaptive_avg("adaptive_avg_pool3d", 3, x, output_size)


def _gather_table(size, out, xp):
    """(out, kmax) input positions per window; short windows repeat their last position,
    which changes neither the maximum nor which tie comes first."""
    start, end = _windows(size, out)
    k = int((end - start).max())
    table = np.minimum(start[:, None] + np.arange(k)[None, :], (end - 1)[:, None])
    return xp.asarray(table)


class AdaptiveMaxPoolNd(Function):
    """Adaptive max pooling of (N, C, H, W) or (N, C, D, H, W); ``indices`` are flat
    ``h * W + w`` (``(d * H + h) * W + w``)."""

    def __init__(self, out_size):
        self.out_size = out_size

    def forward(self, x):
        xp = xp_of(x)
        y, index, stride = x, None, 1
        # One spatial axis at a time, the last first.  Before reducing ``axis`` the
        # axes after it are already pooled; ``index`` holds, per element, the flat
        # position of its maximum within those axes, ``stride`` their input size.
        for axis in reversed(range(2, x.ndim)):
            size, o = x.shape[axis], self.out_size[axis - 2]
            table = _gather_table(size, o, xp)                   # (o, k)
            wins = xp.take(y, table, axis=axis)                  # ..., o, k, ...
            best_k = xp.expand_dims(wins.argmax(axis=axis + 1), axis + 1)
            y = xp.take_along_axis(wins, best_k, axis + 1).squeeze(axis + 1)
            rows = xp.arange(o).reshape((o,) + (1,) * (x.ndim - 1 - axis))
            best = table[rows, best_k.squeeze(axis + 1)]         # absolute position
            flat = best * stride
            if index is not None:       # plus the position within the axes after it
                flat = flat + xp.take_along_axis(index, best, axis)
            index, stride = flat, stride * size
        self.indices = index
        return y

    def backward(self, gy):
        return IndexScatter(self.indices, self.inputs[0].shape)(gy)


def _adaptive_max(op, dims, x, output_size, return_indices):
    shape4, restore = as_4d(op, x, dims)
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"{op}: return_indices must be a bool, got {return_indices!r}")
    out = ((1,) if dims == 1 else ()) + _output_size(op, output_size, shape4[-dims:])
    f = AdaptiveMaxPoolNd(out)
    y = restore(f(reshape(x, shape4)))
    if return_indices:
        return y, Variable(restore(f.indices), requires_grad=False)
    return y


@register("pooling")
def adaptive_max_pool2d(x, output_size, return_indices=False):
    """Max pooling of (N, C, H, W) or (C, H, W) to ``output_size``; with
    ``return_indices`` also the flat int64 positions of the maxima."""
    return _adaptive_max("adaptive_max_pool2d", 2, x, output_size, return_indices)


@register("pooling")
def adaptive_max_pool1d(x, output_size, return_indices=False):
    """Max pooling of (N, C, L) or (C, L) to length ``output_size``."""
    return _adaptive_max("adaptive_max_pool1d", 1, x, output_size, return_indices)


@register("pooling")
def adaptive_max_pool3d(x, output_size, return_indices=False):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size``; with
    ``return_indices`` also the flat int64 positions ``(d * H + h) * W + w`` of the
    maxima."""
    return _adaptive_max("adaptive_max_pool3d", 3, x, output_size, return_indices)
