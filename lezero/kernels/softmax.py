"""Softmax kernels: attention's masked, scaled softmax and its gradient, and the row
statistics of cross entropy.

* ``masked_softmax(s, scale, causal, keep)``: ``softmax(scale * s)`` over the last axis
  where the bool array ``keep`` (or None) and, with ``causal``, the column <= the row in
  its (L, S) matrix allow; -inf scores count as masked and a row with nothing left gives
  zeros, never NaN.
* ``softmax_grad(y, gy, scale)``: ``scale * y * (gy - sum(gy * y))``.
* ``softmax_stats(x)``: per row of (N, C) logits the exponentials ``exp(x - max)``, the
  reciprocal of their sum and the log-sum-exp (cross entropy's forward).

Each has a NumPy/CuPy ``*_ref`` (five passes over the scores for the softmax) and a
``*_numba`` float32 kernel (one pass per row; the masked columns of a causal row are never
exponentiated; C-contiguous arrays viewed as (rows, S)); the plain names dispatch.
"""
import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.kernels.fastexp import FAST, exp32, max32

__all__ = ["masked_softmax", "softmax_grad", "softmax_stats", "masked_softmax_ref",
           "softmax_grad_ref", "softmax_stats_ref", "masked_softmax_numba",
           "softmax_grad_numba", "softmax_stats_numba"]


# ----- NumPy references ---------------------------------------------------------------------

def _xp(a):
    from lezero.cuda import get_array_module
    return get_array_module(a)


def masked_softmax_ref(s, scale=1.0, causal=False, keep=None):
    """softmax(scale * s) over the last axis where ``keep`` (and ``causal``) allow."""
    xp = _xp(s)
    if scale != 1:
        s = s * s.dtype.type(scale)
    if causal:
        tril = xp.tril(xp.ones(s.shape[-2:], dtype=bool))
        keep = tril if keep is None else keep & tril
    if keep is not None:
        s = xp.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = xp.exp(s - xp.where(xp.isfinite(m), m, 0))
    d = e.sum(axis=-1, keepdims=True)
    return e / xp.where(d == 0, 1, d)


def softmax_grad_ref(y, gy, scale=1.0):
    """scale * y * (gy - sum(gy * y, last axis))."""
    dot = (gy * y).sum(axis=-1, keepdims=True)
    out = y * (gy - dot)
    return out * out.dtype.type(scale) if scale != 1 else out


def softmax_stats_ref(x):
    """(exp(x - max), 1 / its sum, log-sum-exp) over axis 1."""
    xp = _xp(x)
    m = x.max(axis=1, keepdims=True)
    e = x - m
    xp.exp(e, out=e)
    ssum = e.sum(axis=1, keepdims=True)
    inv_sum = 1 / ssum
    xp.log(ssum, out=ssum)
    ssum += m
    return e, inv_sum, ssum.squeeze(1)


# ----- Numba kernels (float32) ----------------------------------------------------------------

_f = np.float32
# Reductions (row max, row sum) vectorise only when LLVM may reassociate them.  exp32's
# one hazard under reassociation is overflow near x = 88; here its argument is <= 0.
_FAST_REASSOC = FAST | {"reassoc"}


@jit(cache=True, fastmath=_FAST_REASSOC, error_model="numpy")
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


@jit(cache=True, fastmath=_FAST_REASSOC, error_model="numpy")
def _backward(y, gy, scale, out):
    rows, cols = y.shape
    for r in range(rows):
        dot = _f(0)
        for j in range(cols):
            dot += gy[r, j] * y[r, j]
        for j in range(cols):
            out[r, j] = scale * y[r, j] * (gy[r, j] - dot)


@jit(cache=True, fastmath=_FAST_REASSOC, error_model="numpy")
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


def softmax_stats_numba(x):
    """For a float32 (N, C) array: ``e = exp(x - max)``, ``1 / e.sum(1)`` as (N, 1) and
    the rows' log-sum-exp (N,), in one pass per row (cross entropy's forward)."""
    argcheck.arrays("softmax_stats_numba", x=x)
    argcheck.dtype_is("softmax_stats_numba", "x", x, np.float32)
    argcheck.ndim_is("softmax_stats_numba", "x", x, 2)
    return _softmax_stats(x)


def _softmax_stats(x):
    x = np.ascontiguousarray(x)
    e = np.empty(x.shape, np.float32)
    inv_sum = np.empty((x.shape[0], 1), np.float32)
    lse = np.empty(x.shape[0], np.float32)
    _stats(x, e, inv_sum, lse)
    return e, inv_sum, lse


def _rows(a):
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])


def masked_softmax_numba(s, scale=1.0, causal=False):
    """softmax(scale * s) over the last axis of a float32 array (..., L, S); with
    ``causal`` row i of every (L, S) matrix keeps only columns <= i (others give 0)."""
    argcheck.arrays("masked_softmax_numba", s=s)
    argcheck.dtype_is("masked_softmax_numba", "s", s, np.float32)
    if s.ndim < 2:
        raise ValueError(f"masked_softmax_numba: s must be (..., L, S), at least 2-D, got "
                         f"shape {s.shape}")
    return _masked_softmax(s, scale, causal)


def _masked_softmax(s, scale, causal):
    out = np.empty(s.shape, np.float32)
    if s.size:              # an empty (L, S) has no rows: nothing to compute
        _forward(_rows(s), _f(scale), s.shape[-2], bool(causal), out.reshape(-1, s.shape[-1]))
    return out


def softmax_grad_numba(y, gy, scale=1.0):
    """scale * y * (gy - sum(gy * y, last axis)) for float32 arrays of one shape (the
    kernel reads a row of ``gy`` for every row of ``y``)."""
    argcheck.arrays("softmax_grad_numba", y=y, gy=gy)
    argcheck.dtype_is("softmax_grad_numba", "y", y, np.float32)
    argcheck.dtype_is("softmax_grad_numba", "gy", gy, np.float32)
    argcheck.same_shape("softmax_grad_numba", "y", y, "gy", gy)
    return _softmax_grad(y, gy, scale)


def _softmax_grad(y, gy, scale):
    out = np.empty(y.shape, np.float32)
    if y.size:
        _backward(_rows(y), _rows(gy), _f(scale), out.reshape(-1, y.shape[-1]))
    return out


# ----- dispatch ---------------------------------------------------------------------------------

def _float32(*arrays):
    return all(a.dtype == np.float32 for a in arrays) and enabled(*arrays)


def masked_softmax(s, scale=1.0, causal=False, keep=None):
    """The kernel for float32 NumPy scores of at least 2 dims without a ``keep`` mask."""
    if keep is None and s.ndim >= 2 and _float32(s):
        return _masked_softmax(s, scale, causal)
    return masked_softmax_ref(s, scale, causal, keep)


def softmax_grad(y, gy, scale=1.0):
    """The kernel for float32 NumPy arrays, else the reference; ``y`` and ``gy`` must
    have one shape on either path."""
    argcheck.same_shape("softmax_grad", "y", y, "gy", gy)
    return _softmax_grad(y, gy, scale) if _float32(y, gy) else softmax_grad_ref(y, gy, scale)


def softmax_stats(x):
    """The kernel for float32 NumPy (N, C) logits, else the reference."""
    return _softmax_stats(x) if x.ndim == 2 and _float32(x) else softmax_stats_ref(x)
