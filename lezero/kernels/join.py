"""Joining arrays that already lie side by side in memory, without copying.

``split``'s backward concatenates the gradients of its pieces.  When those gradients were
written into one buffer, slice by slice, in the order and layout of the pieces -- the
fused attention's dQ, dK and dV are (``lezero.kernels.attention``), so a GPT block's
q/k/v ``split`` gets back three slices of one (B, T, 3C) array -- the concatenation is
that buffer itself, and the copy (as much memory traffic as the pieces' size, on every
attention block: docs/performance.md) is saved.

``adjacent_join(arrays, axis)`` returns the joined array as a read-only view when the
arrays are such slices, and None otherwise (the caller concatenates).  Read-only,
because the same memory is also the pieces' gradients: whoever wants to write into it
(the engine's accumulation of a leaf's ``.grad``) copies first.
"""
import numpy as np

__all__ = ["adjacent_join"]


def _owner(a):
    """The object that owns ``a``'s memory: the last array of its ``base`` chain, or the
    buffer under it (``np.frombuffer`` views a bytes object, which has no ``base``)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def adjacent_join(arrays, axis):
    """The concatenation of NumPy ``arrays`` along ``axis`` as a view, when each starts
    where the previous ends along ``axis`` with the same strides, dtype and other
    dimensions in one owning buffer; else None."""
    first = arrays[0]
    if type(first) is not np.ndarray or len(arrays) < 2 or first.ndim == 0:
        return None
    if not -first.ndim <= axis < first.ndim:
        raise ValueError(f"adjacent_join: axis {axis} is out of range for arrays of "
                         f"{first.ndim} dims")
    axis = axis % first.ndim
    step = first.strides[axis]
    owner = _owner(first)
    address = first.__array_interface__["data"][0]
    length = 0
    for a in arrays:
        if (type(a) is not np.ndarray or a.dtype != first.dtype or a.strides != first.strides
                or a.shape[:axis] != first.shape[:axis]
                or a.shape[axis + 1:] != first.shape[axis + 1:] or _owner(a) is not owner
                or a.__array_interface__["data"][0] != address + length * step):
            return None
        length += a.shape[axis]
    shape = first.shape[:axis] + (length,) + first.shape[axis + 1:]
    # Each piece is a valid view of ``owner`` and they follow each other along ``axis``
    # with one stride, so the joined view touches exactly the pieces' elements.
    return np.lib.stride_tricks.as_strided(first, shape, first.strides, writeable=False)
