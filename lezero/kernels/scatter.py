"""``target[index] += values`` in place, where repeated indices all add up.

A plain ``target[index] += values`` keeps only one of the repeats.  ``scatter_add_ref`` is
``numpy.add.at`` (``cupyx.scatter_add`` on CuPy): general but far slower than the Numba
loop for an embedding's weight gradient (docs/performance.md).  The kernel handles the
common case -- whole rows picked by a 1-D integer index -- and ``scatter_add_``
dispatches; max pooling's backward is this kernel too (one-element rows of the flattened
planes).
"""
import math

import numpy as np

from lezero.kernels import argcheck, enabled, jit

__all__ = ["scatter_add_", "scatter_add_ref", "scatter_add_rows_", "scatter_planes_"]


def scatter_add_ref(target, index, values):
    """``target[index] += values`` with repeats adding up (any index NumPy accepts)."""
    if isinstance(target, np.ndarray):
        np.add.at(target, index, values)
        return target
    from lezero.backends import get_backend
    return get_backend(target).scatter_add(target, index, values)


@jit(cache=True, nogil=True)
def _scatter_rows(target, index, values):
    """``target[p, index[p, i]] += values[p, i]`` for every plane ``p``: ``target`` is
    (planes, n, width), ``index`` (planes, m), ``values`` (planes, m, width).  Returns -1,
    or the flat position in ``index`` of the first index outside [-n, n), where it stops
    (the rows before it are added): the range check costs nothing in this loop, where a
    separate pass over the index would cost a fifth of the scatter."""
    n, width, m = target.shape[1], target.shape[2], index.shape[1]
    for p in range(target.shape[0]):
        for i in range(m):
            r = index[p, i]
            if r < 0:
                r += n
            if r < 0 or r >= n:
                return p * m + i
            if width == 1:        # max pooling's planes: a loop of one costs 2x here
                target[p, r, 0] += values[p, i, 0]
            else:
                for j in range(width):
                    target[p, r, j] += values[p, i, j]
    return -1


def check_index(op, index):
    """TypeError unless ``index`` is an integer NumPy array; uint64 values beyond int64
    (which the kernel's int64 copy would wrap to negative) are out of range."""
    argcheck.arrays(op, index=index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must hold integers, got dtype {index.dtype}")
    if index.dtype == np.uint64 and index.size and int(index.max()) > np.iinfo(np.int64).max:
        raise IndexError(f"{op}: index {int(index.max())} is out of range (beyond int64)")


def run_planes(op, target, index, values):
    """The kernel on checked planes; IndexError naming the first bad index."""
    planes, n = target.shape[:2]
    width = math.prod(target.shape[2:])
    m = index.shape[1]
    values = np.ascontiguousarray(values, dtype=target.dtype).reshape(planes, m, width)
    # int64 always: unsigned indices would make Numba type ``r + n`` as a float.
    flat = index.astype(np.int64, copy=False)
    bad = _scatter_rows(target.reshape(planes, n, width), flat, values)
    if bad >= 0:
        raise out_of_range(op, int(flat.reshape(-1)[bad]), n)
    return target


def out_of_range(op, value, n):
    """The IndexError for an index outside [-n, n)."""
    return IndexError(f"{op}: index {value} is out of range for {n} rows (valid indices "
                      f"are {-n} to {n - 1})")


def scatter_planes_(target, index, values):
    """The kernel over planes: ``target[p, index[p, i]] += values[p, i]`` for a
    C-contiguous ``target`` (planes, n, ...), an integer ``index`` (planes, m) and
    ``values`` of shape (planes, m) + target.shape[2:].  Max pooling's backward: one plane
    per (sample, channel), no flat indices to build.  An index outside [-n, n) raises
    IndexError, leaving ``target`` partly updated."""
    op = "scatter_planes_"
    argcheck.arrays(op, target=target, values=values)
    check_index(op, index)
    argcheck.ndim_is(op, "index", index, 2)
    if target.ndim < 2:
        raise ValueError(f"{op}: target must be (planes, n, ...), got shape {target.shape}")
    argcheck.c_contiguous(op, "target", target)     # a copy would take the sums
    if index.shape[0] != target.shape[0]:
        raise ValueError(f"{op}: index must have one row per plane of target "
                         f"({target.shape[0]}), got shape {index.shape}")
    argcheck.shape_is(op, "values", values, index.shape + target.shape[2:])
    return run_planes(op, target, index, values)


def scatter_add_rows_(target, index, values):
    """The kernel: ``target[index[i]] += values[i]`` for a C-contiguous ``target`` of shape
    (n, ...), a 1-D integer ``index`` (negative counts from the end) and ``values`` of
    shape (len(index),) + target.shape[1:]."""
    op = "scatter_add_rows_"
    index, values = np.asarray(index), np.asarray(values)
    argcheck.arrays(op, target=target)
    check_index(op, index)
    argcheck.ndim_is(op, "index", index, 1)
    if target.ndim < 1:
        raise ValueError(f"{op}: target must have at least 1 dim, got a 0-d array")
    argcheck.c_contiguous(op, "target", target)
    argcheck.shape_is(op, "values", values, index.shape + target.shape[1:])
    run_planes(op, target[None], index[None], values[None])
    return target


def _rows_case(target, index, values):
    """Whole rows picked by a 1-D integer index: the case the kernel handles."""
    return (isinstance(index, np.ndarray) and index.ndim == 1 and index.dtype.kind in "iu"
            and target.ndim >= 1 and target.flags.c_contiguous and target.dtype.kind == "f"
            and getattr(values, "shape", None) == index.shape + target.shape[1:]
            and enabled(target))


def scatter_add_(target, index, values):
    """Dispatch: the kernel for whole rows where ``enabled``, else the reference."""
    if _rows_case(target, index, values):
        return scatter_add_rows_(target, index, values)
    return scatter_add_ref(target, index, values)
