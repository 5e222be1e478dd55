"""Indexing operators: get_item, take, index_select, gather, scatter_add.

Reading with integer indices and scatter-adding are each other's gradients: the
backward of a read scatter-adds the upstream gradient into zeros (so an element read
twice collects both contributions), and the backward of a scatter-add reads.  Because
each backward calls the other operator, gradients differentiate to any order.
"""
import numpy as np

from lezero import cuda
from lezero.backends import get_backend, of_namespace
from lezero.core import Function, Variable
from lezero.functions.common import data_of, xp_of
from lezero.functions.registry import register
from lezero.functions.shape.views import reshape
from lezero.kernels.scatter import scatter_add_
from lezero.utils.checks import check_array, check_axis

__all__ = ["get_item", "take", "index_select", "gather", "scatter_add", "IndexOutOfRangeError"]


class IndexOutOfRangeError(IndexError, ValueError):
    """An index outside its axis.  It is an ``IndexError`` (what NumPy and PyTorch raise)
    and a ``ValueError`` (what LeZero raises for bad argument values), as NumPy's
    ``AxisError`` is."""


# ----- helpers ------------------------------------------------------------------------

def to_backend(xp, index):
    """Move the array parts of an index to ``xp``'s backend (CuPy cannot index with NumPy
    arrays; NumPy takes lists as they are)."""
    backend = of_namespace(xp)
    kinds = cuda.array_types() if backend.is_host else (np.ndarray, list)
    return tuple(backend.asarray(i) if isinstance(i, kinds) else i for i in index)


def _int_indices(op, name, indices, xp):
    """An integer index argument (int, list, array or constant Variable) as an ``xp`` array."""
    if isinstance(indices, Variable):
        indices = indices.data
    if isinstance(indices, (list, tuple, int, np.integer)) and not isinstance(indices, bool):
        arr = np.asarray(indices)
        if arr.size == 0:
            arr = arr.astype(np.int64)
    elif isinstance(indices, cuda.array_types()):
        arr = indices
    else:
        raise TypeError(f"{op}: {name} must be an integer array, list or int, "
                        f"got {type(indices).__name__}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must hold integers, got dtype {arr.dtype}")
    return to_backend(xp, (arr,))[0]


def check_range(op, name, idx, n, allow_negative=False):
    """Raise IndexOutOfRangeError unless every index addresses an axis of length ``n``."""
    if idx.size == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    low = -n if allow_negative else 0
    if lo < low or hi >= n:
        bad = lo if lo < low else hi
        raise IndexOutOfRangeError(f"{op}: {name} holds {bad}, which is out of range for an "
                                   f"axis of length {n}")


# ----- get_item -----------------------------------------------------------------------

def _index_data(index):
    """Replace Variables inside an index by their arrays."""
    if isinstance(index, tuple):
        return tuple(data_of(i) for i in index)
    return data_of(index)


def _check_index_kinds(index):
    """TypeError for index items that are none of NumPy's index kinds."""
    for item in index if isinstance(index, tuple) else (index,):
        if item is None or item is Ellipsis or isinstance(item, (slice, list)):
            continue
        if isinstance(item, (int, np.integer, bool, np.bool_)):
            continue
        if isinstance(item, cuda.array_types()) and item.dtype.kind in "biu":
            continue
        got = getattr(item, "dtype", None) or type(item).__name__
        raise TypeError(f"get_item: index items must be ints, slices, None, Ellipsis or "
                        f"integer/boolean arrays, got {got}")


def _is_basic(index):
    """True when the index has only ints, slices, None and Ellipsis (no repeats possible)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer))
               and not isinstance(i, bool) for i in items)


class GetItem(Function):
    save_inputs, reads_outputs = (), False      # backward needs the input's shape only

    def __init__(self, index):
        self.index = index

    def forward(self, x):
        self.x_shape = x.shape
        return x[self.index]

    def backward(self, gy):
        return GetItemGrad(self.index, self.x_shape)(gy)


class GetItemGrad(Function):
    """Put ``gy`` into zeros of the input's shape at ``index`` (repeated indices add up)."""

    def __init__(self, index, in_shape):
        self.index = index
        self.in_shape = in_shape

    def forward(self, gy):
        gx = xp_of(gy).zeros(self.in_shape, dtype=gy.dtype)
        if _is_basic(self.index):
            gx[self.index] = gy
        else:
            scatter_add_(gx, self.index, gy)
        return gx

    def backward(self, ggx):
        return get_item(ggx, self.index)


@register("shape")
def get_item(x, index):
    """``x[index]`` with NumPy basic and advanced indexing; the gradient scatter-adds."""
    arr = check_array("get_item", "x", x)
    index = _index_data(index)
    _check_index_kinds(index)
    if not get_backend(arr).is_host:
        index = to_backend(xp_of(arr), index if isinstance(index, tuple) else (index,))
    try:
        return GetItem(index)(x)
    except IndexError as e:
        raise IndexOutOfRangeError(f"get_item: {e} (input shape {arr.shape})") from None


def _select(x, idx, axis):
    """``x`` indexed by the integer array ``idx`` along ``axis`` (a GetItem)."""
    return GetItem((slice(None),) * axis + (idx,))(x)


@register("shape")
def take(x, indices, axis=None):
    """Elements of ``x`` at ``indices`` along ``axis`` (of the flattened ``x`` when None),
    as ``numpy.take``; negative indices count from the end.  The result has shape
    ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``."""
    arr = check_array("take", "x", x)
    xp = xp_of(arr)
    idx = _int_indices("take", "indices", indices, xp)
    if axis is None:
        x, axis, n = reshape(x, (-1,)), 0, arr.size
    else:
        axis = check_axis("take", axis, arr.ndim, zero_dim=False)
        n = arr.shape[axis]
    check_range("take", "indices", idx, n, allow_negative=True)
    if idx.size and int(idx.min()) < 0:
        idx = xp.where(idx < 0, idx + n, idx)
    return _select(x, idx, axis)


@register("shape")
def index_select(x, axis, index):
    """The slices of ``x`` at the 1-D integer ``index`` along ``axis``, as
    ``torch.index_select`` (argument order ``(x, axis, index)``)."""
    arr = check_array("index_select", "x", x)
    axis = check_axis("index_select", axis, arr.ndim, zero_dim=False)
    idx = _int_indices("index_select", "index", index, xp_of(arr))
    if idx.ndim > 1:
        raise ValueError(f"index_select: index must be 1-D, got shape {idx.shape}")
    idx = idx.reshape(-1)
    check_range("index_select", "index", idx, arr.shape[axis] if arr.ndim else 1)
    return _select(x, idx, axis)


# ----- gather / scatter_add -----------------------------------------------------------

def _full_index(index, axis):
    """Index arrays that address ``out[i, j, k] = x[i, index[i, j, k], k]`` (for axis 1)."""
    xp = xp_of(index)
    ndim = index.ndim
    return tuple(index if d == axis else
                 xp.arange(s).reshape(tuple(-1 if e == d else 1 for e in range(ndim)))
                 for d, s in enumerate(index.shape))


def _check_scatter_index(op, arr, axis, index):
    """Validate an index for gather / scatter_add (PyTorch rules); return (axis, idx)."""
    if arr.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dim, got a 0-d array")
    axis = check_axis(op, axis, arr.ndim, zero_dim=False)
    idx = _int_indices(op, "index", index, xp_of(arr))
    if idx.ndim != arr.ndim:
        raise ValueError(f"{op}: index must have as many dims as x ({arr.ndim}), "
                         f"got shape {idx.shape}")
    if any(i > s for d, (i, s) in enumerate(zip(idx.shape, arr.shape)) if d != axis):
        raise ValueError(f"{op}: index shape {idx.shape} is larger than x shape {arr.shape} "
                         f"outside axis {axis}")
    check_range(op, "index", idx, arr.shape[axis])
    return axis, idx


class Gather(Function):
    def __init__(self, axis, index):
        self.axis = axis
        self.index = index
        self.full = _full_index(index, axis)

    def forward(self, x):
        self.x_shape = x.shape
        return x[self.full]

    def backward(self, gy):
        zeros = xp_of(gy.data).zeros(self.x_shape, dtype=gy.dtype)
        return ScatterAdd(self.axis, self.index)(zeros, gy)


class ScatterAdd(Function):
    def __init__(self, axis, index):
        self.axis = axis
        self.index = index
        self.full = _full_index(index, axis)

    def forward(self, x, src):
        self.src_shape = src.shape
        out = x.copy()
        scatter_add_(out, self.full, src[tuple(slice(0, s) for s in self.index.shape)])
        return out

    def backward(self, gy):
        need_x, need_src = self.needs_input_grad
        gsrc = None
        if need_src:
            gsrc = Gather(self.axis, self.index)(gy)
            if self.src_shape != self.index.shape:   # src entries beyond index get no grad
                region = tuple(slice(0, s) for s in self.index.shape)
                gsrc = GetItemGrad(region, self.src_shape)(gsrc)
        return (gy if need_x else None), gsrc


@register("shape")
def gather(x, axis, index):
    """``out[i][j][k] = x[i][index[i][j][k]][k]`` (for axis 1), as ``torch.gather``.

    ``index`` has as many dims as ``x``; the result has ``index``'s shape.  The gradient
    scatter-adds, so repeated indices accumulate.
    """
    arr = check_array("gather", "x", x)
    axis, idx = _check_scatter_index("gather", arr, axis, index)
    return Gather(axis, idx)(x)


@register("shape")
def scatter_add(x, axis, index, src):
    """A copy of ``x`` with ``src`` added at ``index`` along ``axis``, as
    ``torch.scatter_add``: ``out[i][index[i][j][k]][k] += src[i][j][k]`` (for axis 1)."""
    arr = check_array("scatter_add", "x", x)
    src_arr = check_array("scatter_add", "src", src)
    if src_arr.dtype != arr.dtype:
        raise TypeError(f"scatter_add: src dtype {src_arr.dtype} differs from x dtype "
                        f"{arr.dtype}")
    axis, idx = _check_scatter_index("scatter_add", arr, axis, index)
    if src_arr.ndim != idx.ndim or any(i > s for i, s in zip(idx.shape, src_arr.shape)):
        raise ValueError(f"scatter_add: src shape {src_arr.shape} must be at least index "
                         f"shape {idx.shape} in every dim")
    return ScatterAdd(axis, idx)(x, src)
