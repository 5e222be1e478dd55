"""What the pooling modules share: argument checks, output geometry, and the index
scatter/gather pair that carries max pooling's gradient (and its gradient's gradient).
"""
import itertools

import numpy as np

from lezero.core import Function, Variable
from lezero.functions.common import xp_of
from lezero.functions.shape import reshape
from lezero.kernels import pooling as pool_kernels
from lezero.utils.checks import check_bool, check_float_array, ntuple

# ----- argument checks and output geometry -----------------------------------------------

def pooled_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling output length for one axis (0 or less means too small)."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    # In ceil mode the last window must start inside the input or the left padding.
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


class Geom:
    """Kernel, stride, padding, dilation, input and output size of a pooling over two or
    three spatial axes (1-D pooling runs as 2-D over a height of one); all are tuples with
    one entry per spatial axis."""

    def __init__(self, kernel, stride, padding, dilation, in_size, out_size):
        self.kernel, self.stride, self.padding = kernel, stride, padding
        self.dilation, self.in_size, self.out_size = dilation, in_size, out_size

    def taps(self):
        """For each kernel tap: the slices of the padded input that feed every output."""
        for tap in itertools.product(*(range(k) for k in self.kernel)):
            yield (Ellipsis,) + tuple(
                slice(t * d, t * d + (o - 1) * s + 1, s)
                for t, d, o, s in zip(tap, self.dilation, self.out_size, self.stride))

    def padded_shape(self):
        """The padded spatial shape: both paddings, plus room for ceil-mode overhang."""
        return tuple(max(n + 2 * p, (o - 1) * s + (k - 1) * d + 1) for n, p, o, s, k, d in
                     zip(self.in_size, self.padding, self.out_size, self.stride, self.kernel,
                         self.dilation))

    def interior(self):
        """The slices of the padded input that hold the input itself."""
        return (Ellipsis,) + tuple(slice(p, p + n) for p, n in zip(self.padding, self.in_size))


def as_4d(op, x, dims):
    """Check the input of a ``dims``-D pooling; return the shape to run it in, (N, C, H, W)
    or (N, C, D, H, W) for 3-D, plus a function that restores the caller's layout
    (unbatched, and 1-D)."""
    arr = check_float_array(op, "x", x)
    if arr.ndim not in (dims + 1, dims + 2) or 0 in arr.shape[-dims - 1:]:
        raise ValueError(f"{op}: expected a {dims + 1}-D (unbatched) or {dims + 2}-D input with "
                         f"non-empty channel and spatial dims, got shape {arr.shape}")
    shape4 = ((1,) if arr.ndim == dims + 1 else ()) + arr.shape[:-dims] \
        + ((1,) if dims == 1 else ()) + arr.shape[-dims:]
    batched = arr.ndim == dims + 2

    def restore(y, keep_h=False):
        """(N, C, *output size) back to the input's layout."""
        shape = y.shape if batched else y.shape[1:]
        if dims == 1 and not keep_h:
            shape = shape[:-2] + shape[-1:]
        return reshape(y, shape) if isinstance(y, Variable) else y.reshape(shape)
    return shape4, restore


def geometry(op, shape4, kernel_size, stride, padding, dilation, ceil_mode, dims):
    """Validate the pooling arguments and compute the output size (as tuples over the
    spatial axes of ``shape4``: 1-D pooling runs over a height of one)."""
    kernel = ntuple(op, "kernel_size", kernel_size, dims, low=1)
    stride = kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else ntuple(op, "stride", stride, dims, low=1)
    padding = ntuple(op, "padding", padding, dims, low=0)
    dilation = ntuple(op, "dilation", dilation, dims, low=1)
    check_bool(op, "ceil_mode", ceil_mode)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise ValueError(f"{op}: padding {padding} must be at most half of kernel_size "
                         f"{kernel}")
    if dims == 1:       # run 1-D pooling as 2-D pooling over a height of one
        kernel, stride, padding, dilation = ((1,) + kernel, (1,) + stride, (0,) + padding,
                                             (1,) + dilation)
    in_size = shape4[2:]
    out = tuple(pooled_size(*a, ceil_mode) for a in zip(in_size, kernel, stride, padding,
                                                          dilation))
    if min(out) < 1:
        lead = len(in_size) - dims      # the added height of 1-D pooling is not reported
        raise ValueError(f"{op}: input of spatial size {in_size[lead:]} is too small for "
                         f"kernel_size {kernel[lead:]}, padding {padding[lead:]} and "
                         f"dilation {dilation[lead:]} (output size {out[lead:]})")
    return Geom(kernel, stride, padding, dilation, in_size, out)


# ----- the gradient of max pooling ----------------------------------------------------------

def _check_planes(op, name, got, indices, x_shape):
    """ValueError unless ``got`` is the indices' shape and both have the (N, C) planes of
    ``x_shape``: each plane's indices address that plane only."""
    if tuple(got) != tuple(indices) or len(x_shape) < 3 or tuple(indices[:2]) != \
            tuple(x_shape[:2]):
        raise ValueError(f"{op}: {name} of shape {tuple(got)} and indices of shape "
                         f"{tuple(indices)} must share the (N, C) planes of {tuple(x_shape)}")


class IndexScatter(Function):
    """``gx[n, c, indices[n, c, ...]] += g[n, c, ...]`` into zeros of ``x_shape``: the
    gradient of max pooling (indices are flat over the spatial dims)."""

    def __init__(self, indices, x_shape):
        self.indices = indices
        self.x_shape = x_shape

    def forward(self, g):
        _check_planes("max pooling's gradient", "gradient", g.shape, self.indices.shape,
                      self.x_shape)
        rows = self.x_shape[0] * self.x_shape[1]
        row_size = int(np.prod(self.x_shape[2:]))
        gx = pool_kernels.scatter_add_rows(g.reshape(rows, -1),
                                           self.indices.reshape(rows, -1), row_size)
        return gx.reshape(self.x_shape)

    def backward(self, ggx):
        return IndexGather(self.indices)(ggx)


class IndexGather(Function):
    """``y[n, c, ...] = x[n, c, indices[n, c, ...]]``: the transpose of ``IndexScatter``."""

    def __init__(self, indices):
        self.indices = indices

    def forward(self, x):
        _check_planes("max pooling's index gather", "indices", self.indices.shape,
                      self.indices.shape, x.shape)
        self.x_shape = x.shape
        rows = x.shape[0] * x.shape[1]
        y = xp_of(x).take_along_axis(x.reshape(rows, -1), self.indices.reshape(rows, -1), 1)
        return y.reshape(self.indices.shape)

    def backward(self, gy):
        return IndexScatter(self.indices, self.x_shape)(gy)
