"""A layer's bias: added to every row of its output, and its gradient (the column sums of
the output's gradient), each as one Numba pass.

``linear`` adds its bias after the matrix product, where PyTorch's ``addmm`` folds it into
the product.  NumPy's broadcast add ``y += b`` and its column sum ``gy.sum(axis=0)`` are
one pass each but slow ones for this shape (the inner loop restarts for every row); the
loops below take about half their time (docs/performance.md).

``add_bias_(y, b)`` adds ``b`` to every row of the 2-D ``y`` in place; ``bias_grad(g)``
returns the column sums of the 2-D ``g``.  The kernel sums each column over the rows in
order, in the array's dtype, as NumPy's reduction over axis 0 of a C-contiguous array
with two or more columns does, so the two agree bit for bit.  (With one column that axis
is contiguous and NumPy sums it pairwise, so a single column goes to NumPy.)  Both take
C-contiguous float32/float64 NumPy arrays of one dtype (``fits``); the references
(``*_ref``, also the CuPy path) take the rest.
"""
import numpy as np

from lezero.kernels import argcheck, enabled, jit

__all__ = ["add_bias_", "add_bias_ref", "add_bias_numba", "bias_grad", "bias_grad_ref",
           "bias_grad_numba", "fits"]


def add_bias_ref(y, b):
    """``y += b`` on every row of the 2-D ``y`` (NumPy or CuPy)."""
    y += b


def bias_grad_ref(g):
    """The column sums of the 2-D ``g`` (NumPy or CuPy)."""
    return g.sum(axis=0)


@jit(cache=True, nogil=True)
def _add_rows(y, b):
    rows, cols = y.shape
    for i in range(rows):
        for j in range(cols):
            y[i, j] += b[j]


@jit(cache=True, nogil=True)
def _column_sums(g, out):
    rows, cols = g.shape
    for j in range(cols):
        out[j] = 0
    for i in range(rows):
        for j in range(cols):
            out[j] += g[i, j]


def fits(*arrays):
    """Whether the kernels take these arrays (C-contiguous NumPy floats of one dtype)."""
    first = arrays[0]
    return (first.dtype in (np.float32, np.float64) and enabled(*arrays)
            and all(a.dtype == first.dtype and a.flags.c_contiguous for a in arrays))


def _check_add_bias(op, y, b):
    """The kernel reads ``b[j]`` for every column of ``y`` without bounds checks."""
    if y.ndim != 2 or b.shape != (y.shape[1],):
        raise ValueError(f"{op}: y must be 2-D and b of shape (columns,); got y "
                         f"{tuple(y.shape)} and b {tuple(b.shape)}")


def add_bias_numba(y, b):
    """``add_bias_ref`` as one Numba pass (arrays that ``fits`` takes)."""
    argcheck.arrays("add_bias_numba", y=y, b=b)
    argcheck.floats("add_bias_numba", "y", y)
    _check_add_bias("add_bias_numba", y, b)
    _add_rows(y, b)


def bias_grad_numba(g):
    """``bias_grad_ref`` as one Numba pass (a 2-D array that ``fits`` takes)."""
    argcheck.arrays("bias_grad_numba", g=g)
    argcheck.floats("bias_grad_numba", "g", g)
    argcheck.ndim_is("bias_grad_numba", "g", g, 2)
    return _bias_grad(g)


def _bias_grad(g):
    out = np.empty(g.shape[1], g.dtype)
    _column_sums(g, out)
    return out


def add_bias_(y, b):
    """Add ``b`` to every row of the 2-D ``y`` in place: the kernel where it ``fits``."""
    _check_add_bias("add_bias_", y, b)
    if fits(y, b):
        _add_rows(y, b)
    else:
        add_bias_ref(y, b)


def bias_grad(g):
    """The column sums of the 2-D ``g``: the kernel where it ``fits``, else NumPy's sum."""
    return (_bias_grad if g.ndim == 2 and g.shape[1] > 1 and fits(g)
            else bias_grad_ref)(g)
