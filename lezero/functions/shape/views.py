"""Shape operators that only change how the data is viewed: reshape, transpose, swapaxes,
moveaxis, squeeze, expand_dims, flatten, broadcast_to, sum_to.

Their backwards are the inverse moves (reshape back, inverse permutation, sum over the
broadcast axes), written with these same operators, so they differentiate to any order.
Several are thin wrappers that compute a new shape or permutation and hand it to
``Reshape`` or ``Transpose``.
"""
import math

import numpy as np

from lezero.core import Function, Variable
from lezero.functions.common import data_of, inverse_permutation, xp_of
from lezero.functions.registry import register
from lezero.utils.checks import check_array, check_axis

__all__ = ["reshape", "transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims", "flatten",
           "broadcast_to", "sum_to"]


def _shape_arg(op, shape):
    """Accept reshape(x, (2, 3)) and x.reshape(2, 3) alike; validate the entries."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}: shape entries must be ints, got {shape!r}")
    return tuple(int(s) for s in shape)


def axis_tuple(op, axis, ndim, name="axis"):
    """An int or a sequence of ints as a tuple of axes in [0, ndim); repeats are errors."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(check_axis(op, a, ndim, name, zero_dim=False) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {name}={axis!r}")
    return out


class Reshape(Function):
    save_inputs, reads_outputs = (), False      # backward needs the input's shape only

    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return x.reshape(self.shape)

    def backward(self, gy):
        return reshape(gy, self.x_shape)


@register("shape")
def reshape(x, *shape):
    """``x`` with a new shape (one entry may be -1), as ``numpy.reshape``."""
    shape = _shape_arg("reshape", shape)
    size = check_array("reshape", "x", x).size
    known = math.prod(s for s in shape if s != -1)
    if shape.count(-1) > 1 or any(s < -1 for s in shape) or (
            -1 not in shape and known != size) or (-1 in shape and (known == 0 or size % known)):
        raise ValueError(f"reshape: cannot reshape an array of shape {data_of(x).shape} "
                         f"(size {size}) into shape {shape}")
    if isinstance(x, Variable) and x.shape == shape:
        return x
    return Reshape(shape)(x)


class Transpose(Function):
    def __init__(self, axes):
        self.axes = axes

    def forward(self, x):
        return x.transpose(self.axes)

    def backward(self, gy):
        if self.axes is None:
            return transpose(gy)
        return transpose(gy, inverse_permutation(self.axes))


@register("shape")
def transpose(x, axes=None):
    """Permute the axes (reverse them when ``axes`` is None), as ``numpy.transpose``."""
    ndim = check_array("transpose", "x", x).ndim
    if axes is not None:
        if not isinstance(axes, (tuple, list)):
            raise TypeError(f"transpose: axes must be a tuple or list of ints, got "
                            f"{type(axes).__name__}")
        axes = tuple(check_axis("transpose", a, ndim, "axes", zero_dim=False) for a in axes)
        if sorted(axes) != list(range(ndim)):
            raise ValueError(f"transpose: axes {axes} is not a permutation of {ndim} dims")
    return Transpose(axes)(x)


@register("shape")
def swapaxes(x, axis1, axis2):
    """Exchange two axes, as ``numpy.swapaxes``."""
    ndim = check_array("swapaxes", "x", x).ndim
    a1 = check_axis("swapaxes", axis1, ndim, "axis1", zero_dim=False)
    a2 = check_axis("swapaxes", axis2, ndim, "axis2", zero_dim=False)
    perm = list(range(ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return Transpose(tuple(perm))(x)


@register("shape")
def moveaxis(x, source, destination):
    """Move axes ``source`` to positions ``destination`` (ints or sequences), keeping the
    order of the others, as ``numpy.moveaxis``."""
    ndim = check_array("moveaxis", "x", x).ndim
    src = axis_tuple("moveaxis", source, ndim, "source")
    dst = axis_tuple("moveaxis", destination, ndim, "destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} "
                         "must have the same number of elements")
    order = [a for a in range(ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return Transpose(tuple(order))(x)


@register("shape")
def squeeze(x, axis=None):
    """Remove axes of length one (all of them, or those in ``axis``), as ``numpy.squeeze``;
    naming an axis whose length is not one is an error."""
    shape = check_array("squeeze", "x", x).shape
    if axis is None:
        axes = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        axes = axis_tuple("squeeze", axis, len(shape))
        bad = [a for a in axes if shape[a] != 1]
        if bad:
            raise ValueError(f"squeeze: cannot squeeze axis {bad[0]} of length {shape[bad[0]]} "
                             f"(input shape {shape})")
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in axes))


@register("shape")
def expand_dims(x, axis):
    """Insert axes of length one at positions ``axis`` (an int or a tuple) of the result,
    as ``numpy.expand_dims``."""
    shape = check_array("expand_dims", "x", x).shape
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = axis_tuple("expand_dims", axis, len(shape) + n_new)
    rest = iter(shape)
    return reshape(x, tuple(1 if i in axes else next(rest) for i in range(len(shape) + n_new)))


@register("shape")
def flatten(x, start_axis=0, end_axis=-1):
    """Merge axes ``start_axis`` .. ``end_axis`` (inclusive) into one.

    The range follows ``torch.flatten``; the defaults flatten everything to 1-D, as
    ``numpy.ndarray.flatten`` does (a 0-d input becomes shape ``(1,)``).
    """
    shape = check_array("flatten", "x", x).shape
    if not shape:
        return reshape(x, (1,))
    s = check_axis("flatten", start_axis, len(shape), "start_axis", zero_dim=False)
    e = check_axis("flatten", end_axis, len(shape), "end_axis", zero_dim=False)
    if s > e:
        raise ValueError(f"flatten: start_axis {start_axis} comes after end_axis {end_axis} "
                         f"for an input with {len(shape)} dims")
    merged = math.prod(shape[s:e + 1])
    return reshape(x, shape[:s] + (merged,) + shape[e + 1:])


class BroadcastTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return xp_of(x).broadcast_to(x, self.shape)

    def backward(self, gy):
        return sum_to(gy, self.x_shape)


@register("shape")
def broadcast_to(x, shape):
    """``x`` broadcast to ``shape`` (NumPy rules); its gradient sums back."""
    xshape = check_array("broadcast_to", "x", x).shape
    if shape != xshape:
        shape = _shape_arg("broadcast_to", (shape,))
    if xshape == shape and isinstance(x, Variable):
        return x
    try:
        ok = len(shape) >= len(xshape) and np.broadcast_shapes(xshape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"broadcast_to: cannot broadcast shape {xshape} to {shape}")
    return BroadcastTo(shape)(x)


def sum_to_array(x, shape):
    """Sum array ``x`` down to ``shape`` (the reverse of broadcasting)."""
    lead = x.ndim - len(shape)
    if lead and shape == x.shape[lead:] and _gemv_ok(x):
        # Only leading axes go (a bias gradient): a row of ones times x as a (rows, n)
        # matrix is one BLAS gemv, about twice as fast as NumPy's sum over those axes.
        rows = math.prod(x.shape[:lead])
        ones = xp_of(x).ones(rows, x.dtype)
        return (ones @ x.reshape(rows, math.prod(shape))).reshape(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and x.shape[i + lead] != 1)
    y = x.sum(axis=axes, keepdims=True) if axes else x
    return y.reshape(shape) if lead else y


def _gemv_ok(x):
    """NumPy float arrays laid out so that the leading axes merge into rows for free."""
    return (type(x) is np.ndarray and x.dtype in (np.float32, np.float64) and x.ndim >= 2
            and x.flags.c_contiguous)


class SumTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return sum_to_array(x, self.shape)

    def backward(self, gy):
        return broadcast_to(gy, self.x_shape)


@register("shape")
def sum_to(x, shape):
    """Sum ``x`` down to ``shape``: the gradient of ``broadcast_to``."""
    xshape = check_array("sum_to", "x", x).shape
    if shape != xshape:
        shape = _shape_arg("sum_to", (shape,))
    if xshape == shape:
        return x
    try:
        ok = np.broadcast_shapes(shape, xshape) == xshape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"sum_to: shape {xshape} cannot be summed to {shape}")
    return SumTo(shape)(x)
