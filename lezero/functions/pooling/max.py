"""Max pooling (max_pool1d/2d/3d) and max unpooling (max_unpool1d/2d), with
``torch.nn.functional``'s names, arguments and layouts.

Max pooling keeps the flat index ``h * W + w`` (``(d * H + h) * W + w`` in 3-D) of each
window's maximum (PyTorch's ``return_indices``); its gradient scatters into those
positions and the gradient of that is a gather, so max pooling is differentiable twice.
The 2-D forward runs a Numba kernel (``lezero.kernels.pooling``) where it may.
"""
import numpy as np

from lezero.core import Function, Variable
from lezero.functions.common import data_of, xp_of
from lezero.functions.pooling.common import IndexGather, IndexScatter, as_4d, geometry
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.kernels import pooling as pool_kernels
from lezero.utils.checks import check_array, ntuple

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d"]


# ----- max pooling -------------------------------------------------------------------------

class MaxPoolNd(Function):
    """Max pooling over (N, C, H, W) or (N, C, D, H, W); ``indices`` holds each maximum's
    flat position.  Backward needs ``indices`` and the input's shape only."""

    save_inputs, reads_outputs = (), False

    def __init__(self, geom, want_indices=True):
        self.geom = geom
        self.want_indices = want_indices

    def forward(self, x):
        g = self.geom
        if x.shape[2:] != tuple(g.in_size):
            raise ValueError(f"max_pool: input of shape {x.shape} does not fit the pooling "
                             f"geometry, made for spatial size {tuple(g.in_size)}")
        rows = x.shape[0] * x.shape[1]
        args = (x.reshape((rows,) + x.shape[2:]), g.kernel, g.stride, g.padding, g.dilation,
                g.out_size)
        if not getattr(self, "want_indices", True) and not any(self.needs_input_grad):
            self.indices = None         # no gradient and no caller wants the positions
            return pool_kernels.max_values(*args).reshape(x.shape[:2] + g.out_size)
        y, idx = pool_kernels.max_pool(*args)
        self.indices = idx.reshape(x.shape[:2] + g.out_size)
        return y.reshape(x.shape[:2] + g.out_size)

    def backward(self, gy):
        return IndexScatter(self.indices, self.inputs[0].shape)(gy)


def _max_pool(op, dims, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    shape4, restore = as_4d(op, x, dims)
    geom = geometry(op, shape4, kernel_size, stride, padding, dilation, ceil_mode, dims)
    f = MaxPoolNd(geom, want_indices=return_indices)
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


# ----- max unpooling -------------------------------------------------------------------------

class MaxUnpool2d(Function):
    """Place each value at its flat index in zeros of ``out_shape`` (the partial inverse
    of max pooling); the gradient gathers from those positions."""

    def __init__(self, indices, out_shape, op="max_unpool2d"):
        self.indices = indices
        self.out_shape = out_shape
        self.op = op

    def forward(self, x):
        xp = xp_of(x)
        rows = x.shape[0] * x.shape[1]
        size = int(np.prod(self.out_shape[2:]))
        check_unpool_indices(self.op, self.indices, x.shape, self.out_shape[:2], size)
        flat = self.indices.reshape(rows, -1) + (xp.arange(rows) * size)[:, None]
        y = xp.zeros(rows * size, dtype=x.dtype)
        y[flat.ravel()] = x.ravel()      # assignment, as PyTorch: repeated indices keep one
        return y.reshape(self.out_shape)

    def backward(self, gy):
        return IndexGather(self.indices)(gy)


def check_unpool_indices(op, idx, x_shape, lead, size):
    """ValueError unless ``idx`` has the input's shape, the output's leading (N, C) are the
    input's, and every index lies in [0, size): a flat index picks an element of its own
    (n, c) plane, and one outside it would land in another plane."""
    if idx.shape != tuple(x_shape) or tuple(lead) != tuple(x_shape[:2]):
        raise ValueError(f"{op}: indices of shape {idx.shape} and output planes {tuple(lead)} "
                         f"must match the input of shape {tuple(x_shape)}")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
        raise ValueError(f"{op}: indices must lie in [0, {size}) for output planes of "
                         f"{size} elements, got values in [{int(idx.min())}, "
                         f"{int(idx.max())}]")


def _max_unpool(op, dims, x, indices, kernel_size, stride, padding, output_size):
    shape4, restore = as_4d(op, x, dims)
    idx = check_array(op, "indices", indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got dtype {idx.dtype}")
    if idx.shape != data_of(x).shape:
        raise ValueError(f"{op}: indices shape {idx.shape} must equal the input shape "
                         f"{data_of(x).shape}")
    kernel = ntuple(op, "kernel_size", kernel_size, dims, low=1)
    stride = kernel if stride is None else ntuple(op, "stride", stride, dims, low=1)
    padding = ntuple(op, "padding", padding, dims, low=0)
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
    out4 = shape4[:2] + ((1,) if dims == 1 else ()) + out
    f = MaxUnpool2d(idx.reshape(shape4).astype(np.int64, copy=False), out4, op)
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
