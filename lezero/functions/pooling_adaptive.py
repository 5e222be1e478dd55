"""Adaptive pooling: the caller fixes the output size, the windows follow.

Output cell ``i`` of an axis of length ``n`` pooled to ``m`` covers input positions
``floor(i * n / m)`` up to ``ceil((i + 1) * n / m)`` (PyTorch's windows; they may overlap).

* Average: a rectangle's mean is separable, so ``y = A_h @ x @ A_w.T`` with two small
  constant averaging matrices -- matmul's gradient (and its gradient) come for free.
* Max: the maximum over a rectangle is the maximum over rows of the maximum over
  columns; doing the columns first and the rows second keeps PyTorch's choice among
  ties (the first maximum in row-major order).  The gradient scatters to the argmax.
"""
import numpy as np

from lezero.core import Function, Variable
from lezero.functions._utils import constant, xp_of
from lezero.functions.linalg import matmul
from lezero.functions.pooling_common import IndexScatter, as_4d
from lezero.functions.registry import register
from lezero.functions.shape import reshape

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d"]


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
    out = _output_size(op, output_size, shape4[4 - dims:])
    out = ((1,) if dims == 1 else ()) + out
    xp, dtype = xp_of(x), x.dtype
    y = reshape(x, shape4)
    if out[0] != shape4[2]:
        y = matmul(constant(_averaging_matrix(shape4[2], out[0], xp, dtype)), y)
    if out[1] != shape4[3]:
        y = matmul(y, constant(_averaging_matrix(shape4[3], out[1], xp, dtype).T))
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


def _gather_table(size, out, xp):
    """(out, kmax) input positions per window; short windows repeat their last position,
    which changes neither the maximum nor which tie comes first."""
    start, end = _windows(size, out)
    k = int((end - start).max())
    table = np.minimum(start[:, None] + np.arange(k)[None, :], (end - 1)[:, None])
    return xp.asarray(table)


class AdaptiveMaxPool2d(Function):
    """Adaptive max pooling of (N, C, H, W); ``indices`` are flat ``h * W + w``."""

    def __init__(self, out_size):
        self.out_size = out_size

    def forward(self, x):
        xp = xp_of(x)
        (oh, ow), w = self.out_size, x.shape[3]
        th, tw = _gather_table(x.shape[2], oh, xp), _gather_table(w, ow, xp)
        # Columns first: per row, the best column of each output column's window.
        cols = x[..., tw]                                  # (N, C, H, OW, kw)
        best_k = cols.argmax(axis=-1)                      # (N, C, H, OW)
        row_max = xp.take_along_axis(cols, best_k[..., None], -1)[..., 0]
        best_w = tw[xp.arange(ow), best_k]                 # absolute column
        # Then rows: the best row of each output row's window.
        rows = row_max[:, :, th, :]                        # (N, C, OH, kh, OW)
        best_r = rows.argmax(axis=3)                       # (N, C, OH, OW)
        y = xp.take_along_axis(rows, best_r[:, :, :, None, :], 3)[:, :, :, 0, :]
        best_h = th[xp.arange(oh)[:, None], best_r]        # absolute row
        self.indices = best_h * w + xp.take_along_axis(best_w, best_h, 2)
        return y

    def backward(self, gy):
        return IndexScatter(self.indices, self.inputs[0].shape)(gy)


def _adaptive_max(op, dims, x, output_size, return_indices):
    shape4, restore = as_4d(op, x, dims)
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"{op}: return_indices must be a bool, got {return_indices!r}")
    out = ((1,) if dims == 1 else ()) + _output_size(op, output_size, shape4[4 - dims:])
    f = AdaptiveMaxPool2d(out)
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
