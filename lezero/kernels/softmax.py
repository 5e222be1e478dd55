"""Numba kernels for attention's softmax: ``softmax(scale * s)`` over the last axis,
optionally causal (row i of each (L, S) score matrix sees columns 0..i), and its
gradient ``scale * y * (gy - sum(gy * y))``.

The NumPy reference is ``MaskedSoftmax`` in ``lezero.functions.attention.masked_softmax`` (a ``where``,
a max, an exp, a sum and a divide: five passes over the scores plus a separate pass to
scale them); these kernels make one pass per row, and the masked columns of a causal row
are never exponentiated.  They take C-contiguous float32 arrays viewed as (rows, S).

``softmax_stats`` serves cross entropy's forward: per row of (N, C) logits the
exponentials ``exp(x - max)``, the reciprocal of their sum and the log-sum-exp, in one
pass; its NumPy reference is ``_softmax_stats`` in ``lezero.functions.loss.categorical``.
"""
import numba
import numpy as np

from lezero.kernels.fastexp import FAST, exp32, max32

__all__ = ["softmax_forward", "softmax_backward", "softmax_stats"]

_f = np.float32
# Reductions (row max, row sum) vectorise only when LLVM may reassociate them.  exp32's
# one hazard under reassociation is overflow near x = 88; here its argument is <= 0.
_FAST_REASSOC = FAST | {"reassoc"}


@numba.njit(cache=True, fastmath=_FAST_REASSOC, error_model="numpy")
def _forward(s, scale, length, causal, out):
    rows, cols = s.shape
    for r in range(rows):
        n = min(r % length + 1, cols) if causal else cols
        m = max32(s[r], n, scale)
        if m == -np.inf:         # every score -inf: exp gives 0 everywhere, not NaN
            m = _f(0)
        total = _f(0)
        for j in range(n):
            e = exp32(s[r, j] * scale - m)
            out[r, j] = e
            total += e
        inv = _f(1) / total if total != 0 else _f(0)    # a NaN total stays NaN
        for j in range(n):
            out[r, j] *= inv
        for j in range(n, cols):
            out[r, j] = 0


@numba.njit(cache=True, fastmath=_FAST_REASSOC, error_model="numpy")
def _backward(y, gy, scale, out):
    rows, cols = y.shape
    for r in range(rows):
        dot = _f(0)
        for j in range(cols):
            dot += gy[r, j] * y[r, j]
        for j in range(cols):
            out[r, j] = scale * y[r, j] * (gy[r, j] - dot)


@numba.njit(cache=True, fastmath=_FAST_REASSOC, error_model="numpy")
def _stats(x, e, inv_sum, lse):
    rows, cols = x.shape
    for r in range(rows):
        m = max32(x[r], cols, _f(1))      # an infinite m gives NaN, as in NumPy's path
        total = _f(0)
        for j in range(cols):
            v = exp32(x[r, j] - m)
            e[r, j] = v
            total += v
        inv_sum[r, 0] = _f(1) / total
        lse[r] = np.log(total) + m


def softmax_stats(x):
    """For a float32 (N, C) array: ``e = exp(x - max)``, ``1 / e.sum(1)`` as (N, 1) and
    the rows' log-sum-exp (N,), in one pass per row (cross entropy's forward)."""
    x = np.ascontiguousarray(x)
    e = np.empty(x.shape, np.float32)
    inv_sum = np.empty((x.shape[0], 1), np.float32)
    lse = np.empty(x.shape[0], np.float32)
    _stats(x, e, inv_sum, lse)
    return e, inv_sum, lse


def _rows(a):
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])


def softmax_forward(s, scale, causal):
    """softmax(scale * s) over the last axis of a float32 array (..., L, S); with
    ``causal`` row i of every (L, S) matrix keeps only columns <= i (others give 0)."""
    out = np.empty(s.shape, np.float32)
    length = s.shape[-2] if s.ndim >= 2 else 1
    _forward(_rows(s), _f(scale), length, causal, out.reshape(-1, s.shape[-1]))
    return out


def softmax_backward(y, gy, scale):
    """scale * y * (gy - sum(gy * y, last axis)) for float32 arrays of one shape."""
    out = np.empty(y.shape, np.float32)
    _backward(_rows(y), _rows(gy), _f(scale), out.reshape(-1, y.shape[-1]))
    return out
