"""Sorting along an axis: ``sort`` (values and indices, as ``torch.sort``) and ``argsort``.

``sort`` returns ``(values, indices)``.  The values are ``x`` gathered at the sorting
permutation, so their gradient is the upstream gradient put back at those positions (the
same gather/scatter pair ``topk`` uses; each differentiates the other, so any order of
derivative follows).  The indices are an int64 constant.

Ties: LeZero always sorts stably (NumPy's ``kind="stable"``), so ``stable=False`` gives a
stable order too, which is one of the orders PyTorch allows.  With ``descending=True``
tied elements keep their original order as well (as ``torch.sort(..., stable=True)``).
NaN counts as larger than every number: last when ascending, first when descending,
as in PyTorch.
"""
import collections

import numpy as np

from lezero.backends import get_backend
from lezero.functions.common import as_variable, xp_of
from lezero.functions.reduction.basic import reduce_args
from lezero.functions.reduction.order import GatherAlong
from lezero.functions.registry import register
from lezero.utils.checks import check_axis, check_bool

__all__ = ["sort", "argsort"]

SortResult = collections.namedtuple("SortResult", ["values", "indices"])


def _stable_argsort(a, axis):
    """A stable argsort: the backend's ``stable_argsort`` kernel (NumPy's asks for
    ``kind="stable"``), else ``xp.argsort`` (CuPy's is a radix sort: stable already)."""
    return get_backend(a).kernel("stable_argsort", _device_argsort)(a, axis)


def _device_argsort(a, axis):
    return xp_of(a).argsort(a, axis=axis)


def _sort_indices(a, axis, descending):
    """The stable sorting permutation of the array ``a`` along ``axis`` (int64)."""
    xp = xp_of(a)
    if not descending:
        return _stable_argsort(a, axis).astype(np.int64)
    # Sorting the reversed array ascending and reading the result backwards gives a
    # descending order whose ties are in increasing original position; negating the
    # values instead would break unsigned integers and booleans.
    n = a.shape[axis]
    rev = _stable_argsort(xp.flip(a, axis), axis)
    return (n - 1 - xp.flip(rev, axis)).astype(np.int64)


def _sort_args(op, x, axis, descending, stable):
    check_bool(op, "descending", descending)
    check_bool(op, "stable", stable)
    x, _ = reduce_args(op, x, None, False, kinds="biuf")
    axis = check_axis(op, axis, max(x.ndim, 1))
    # PyTorch sorts a 0-d tensor as itself (with dim 0 or -1)
    return x, (None if x.ndim == 0 else axis)


@register("reduction", notes="stable; indices are constants")
def sort(x, axis=-1, descending=False, stable=False):
    """``x`` sorted along ``axis``, like ``torch.sort``: returns ``(values, indices)`` with
    ``values == take_along_axis(x, indices, axis)``.

    The values are differentiable (the gradient goes back to the positions it came
    from); the indices are an int64 constant.  The sort is always stable (see the module
    notes); ``descending=True`` sorts from the largest.
    """
    x, axis = _sort_args("sort", x, axis, descending, stable)
    if axis is None:
        values = x * 1 if x.dtype.kind == "f" else as_variable(x.data.copy())
        return SortResult(values, as_variable(xp_of(x.data).zeros((), np.int64)))
    idx = _sort_indices(x.data, axis, bool(descending))
    return SortResult(GatherAlong(idx, axis)(x), as_variable(idx))


@register("reduction", differentiable=False, notes="stable")
def argsort(x, axis=-1, descending=False, stable=False):
    """The indices that sort ``x`` along ``axis`` (int64, a constant), like
    ``torch.argsort``: ``sort(x, ...).indices``."""
    x, axis = _sort_args("argsort", x, axis, descending, stable)
    if axis is None:
        return as_variable(xp_of(x.data).zeros((), np.int64))
    return as_variable(_sort_indices(x.data, axis, bool(descending)))
