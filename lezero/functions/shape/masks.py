"""Masks, triangles and diagonals: masked_fill, tril, triu, diagonal, one_hot.

Each keeps or moves entries without arithmetic, so its backward is the same selection
(or the scatter back onto the diagonal) and differentiates to any order; one_hot is not
differentiable (its result is a constant).
"""
import numpy as np

from lezero import cuda
from lezero.core import Function, Variable
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.registry import register
from lezero.functions.shape.index import GetItem, check_range, to_backend
from lezero.functions.shape.views import moveaxis
from lezero.utils.checks import check_array, check_axis, check_int, check_number

__all__ = ["masked_fill", "tril", "triu", "diagonal", "one_hot"]


class MaskedFill(Function):
    def __init__(self, mask, value):
        self.mask = mask
        self.value = value

    def forward(self, x):
        xp = xp_of(x)
        return xp.where(self.mask, xp.asarray(self.value, dtype=x.dtype), x)

    def backward(self, gy):
        return MaskedFill(self.mask, 0)(gy)


@register("shape")
def masked_fill(x, mask, value):
    """``x`` with ``value`` wherever the boolean ``mask`` (broadcastable to ``x``) is True,
    as ``Tensor.masked_fill``.  ``value`` is a number (no gradient flows into it)."""
    arr = check_array("masked_fill", "x", x)
    m = check_array("masked_fill", "mask", mask)
    if m.dtype != np.bool_:
        raise TypeError(f"masked_fill: mask must be boolean, got dtype {m.dtype}")
    try:
        ok = np.broadcast_shapes(m.shape, arr.shape) == arr.shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"masked_fill: mask of shape {m.shape} does not broadcast to x's "
                         f"shape {arr.shape}")
    if isinstance(value, Variable) and value.requires_grad:
        raise TypeError("masked_fill: value must be a number; a Variable that requires grad "
                        "would silently get no gradient (use F.where instead)")
    value = data_of(value)
    if isinstance(value, cuda.array_types()) and value.ndim == 0:
        value = value.item()
    check_number("masked_fill", "value", value)
    return MaskedFill(to_backend(xp_of(arr), (m,))[0], value)(x)


class Tri(Function):
    """Keep the lower (``tril``) or upper (``triu``) triangle of the last two axes."""

    def __init__(self, k, lower):
        self.k = k
        self.lower = lower

    def forward(self, x):
        xp = xp_of(x)
        return xp.tril(x, self.k) if self.lower else xp.triu(x, self.k)

    def backward(self, gy):
        return Tri(self.k, self.lower)(gy)


def _tri(op, x, k, lower):
    arr = check_array(op, "x", x)
    if arr.ndim < 2:
        raise ValueError(f"{op}: x must have at least 2 dims, got shape {arr.shape}")
    return Tri(check_int(op, "k", k), lower)(x)


@register("shape")
def tril(x, k=0):
    """The lower triangle of the last two axes (on and below diagonal ``k``); the rest is
    zero, as ``numpy.tril``."""
    return _tri("tril", x, k, lower=True)


@register("shape")
def triu(x, k=0):
    """The upper triangle of the last two axes (on and above diagonal ``k``), as
    ``numpy.triu``."""
    return _tri("triu", x, k, lower=False)


@register("shape")
def diagonal(x, offset=0, axis1=0, axis2=1):
    """The diagonal ``offset`` of the planes spanned by ``axis1`` and ``axis2``, as
    ``numpy.diagonal``: those two axes are removed and the diagonal becomes the last axis.

    Built from ``moveaxis`` and integer indexing, so the gradient is the scatter back
    onto the diagonal.
    """
    arr = check_array("diagonal", "x", x)
    if arr.ndim < 2:
        raise ValueError(f"diagonal: x must have at least 2 dims, got shape {arr.shape}")
    a1 = check_axis("diagonal", axis1, arr.ndim, "axis1", zero_dim=False)
    a2 = check_axis("diagonal", axis2, arr.ndim, "axis2", zero_dim=False)
    if a1 == a2:
        raise ValueError(f"diagonal: axis1 and axis2 are the same axis ({a1})")
    offset = check_int("diagonal", "offset", offset)
    n1, n2 = arr.shape[a1], arr.shape[a2]
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(0, min(n1 - r0, n2 - c0))
    xp = xp_of(arr)
    rows, cols = xp.arange(r0, r0 + length), xp.arange(c0, c0 + length)
    return GetItem((Ellipsis, rows, cols))(moveaxis(x, (a1, a2), (-2, -1)))


@register("shape", differentiable=False)
def one_hot(indices, num_classes=-1):
    """Integer class indices to one-hot rows (int64), as ``torch.nn.functional.one_hot``.

    The result has shape ``indices.shape + (num_classes,)``; ``num_classes=-1`` means
    ``max(indices) + 1``.  Negative or too-large classes are errors.  Not differentiable:
    the result is a constant.
    """
    arr = check_array("one_hot", "indices", indices)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"one_hot: indices must hold integers, got dtype {arr.dtype}")
    num_classes = check_int("one_hot", "num_classes", num_classes)
    if num_classes == -1:
        if arr.size == 0:
            raise ValueError("one_hot: cannot infer num_classes from empty indices")
        num_classes = int(arr.max()) + 1
    if num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be positive or -1, got {num_classes}")
    check_range("one_hot", "indices (a class)", arr, num_classes)
    xp = xp_of(arr)
    out = (arr[..., None] == xp.arange(num_classes)).astype(np.int64)
    return as_variable(out)
