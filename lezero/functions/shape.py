"""Shape and indexing operators: reshape, transpose, broadcast_to, sum_to, get_item ...

These move data around without arithmetic; their backwards are the inverse moves.
"""
import numpy as np

from lezero.core import Function, Variable
from lezero.functions._utils import data_of, normalize_axis, xp_of
from lezero.functions.registry import register

__all__ = ["reshape", "transpose", "broadcast_to", "sum_to", "get_item"]


def _shape_arg(op, shape):
    """Accept reshape(x, (2, 3)) and x.reshape(2, 3) alike; validate the entries."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}: shape entries must be ints, got {shape!r}")
    return tuple(int(s) for s in shape)


class Reshape(Function):
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
    size = data_of(x).size
    known = int(np.prod([s for s in shape if s != -1]))
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
        return transpose(gy, tuple(np.argsort(self.axes)))


@register("shape")
def transpose(x, axes=None):
    """Permute the axes (reverse them when ``axes`` is None), as ``numpy.transpose``."""
    ndim = data_of(x).ndim
    if axes is not None:
        axes = tuple(normalize_axis("transpose", a, ndim) for a in axes)
        if sorted(axes) != list(range(ndim)):
            raise ValueError(f"transpose: axes {axes} is not a permutation of {ndim} dims")
    return Transpose(axes)(x)


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
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    xshape = data_of(x).shape
    if xshape == shape and isinstance(x, Variable):
        return x
    try:
        np.broadcast_shapes(xshape, shape)
        ok = len(shape) >= len(xshape) and np.broadcast_shapes(xshape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"broadcast_to: cannot broadcast shape {xshape} to {shape}")
    return BroadcastTo(shape)(x)


def _sum_to(x, shape):
    """Sum array ``x`` down to ``shape`` (the reverse of broadcasting)."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and x.shape[i + lead] != 1)
    y = x.sum(axis=axes, keepdims=True) if axes else x
    return y.reshape(shape) if lead else y


class SumTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return _sum_to(x, self.shape)

    def backward(self, gy):
        return broadcast_to(gy, self.x_shape)


@register("shape")
def sum_to(x, shape):
    """Sum ``x`` down to ``shape``: the gradient of ``broadcast_to``."""
    shape = tuple(shape)
    xshape = data_of(x).shape
    if xshape == shape:
        return x
    try:
        ok = np.broadcast_shapes(shape, xshape) == xshape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"sum_to: shape {xshape} cannot be summed to {shape}")
    return SumTo(shape)(x)


# ----- indexing -------------------------------------------------------------------------

def _index_data(index):
    """Replace Variables inside an index by their arrays."""
    if isinstance(index, tuple):
        return tuple(data_of(i) for i in index)
    return data_of(index)


def _is_basic(index):
    """True when the index has only ints, slices, None and Ellipsis (no gather)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer))
               and not isinstance(i, bool) for i in items)


class GetItem(Function):
    def __init__(self, index):
        self.index = index

    def forward(self, x):
        self.x_shape = x.shape
        return x[self.index]

    def backward(self, gy):
        return GetItemGrad(self.index, self.x_shape)(gy)


class GetItemGrad(Function):
    """Scatter-add ``gy`` into zeros of the input's shape (repeated indices add up)."""

    def __init__(self, index, in_shape):
        self.index = index
        self.in_shape = in_shape

    def forward(self, gy):
        xp = xp_of(gy)
        gx = xp.zeros(self.in_shape, dtype=gy.dtype)
        if _is_basic(self.index):
            gx[self.index] = gy
        elif xp is np:
            np.add.at(gx, self.index, gy)
        else:
            import cupyx
            cupyx.scatter_add(gx, self.index, gy)
        return gx

    def backward(self, ggx):
        return get_item(ggx, self.index)


@register("shape")
def get_item(x, index):
    """``x[index]`` with NumPy basic and advanced indexing; the gradient scatter-adds."""
    index = _index_data(index)
    try:
        return GetItem(index)(x)
    except IndexError as e:
        raise IndexError(f"get_item: {e} (input shape {data_of(x).shape})") from None
