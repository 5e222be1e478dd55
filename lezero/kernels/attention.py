"""Attention of every head in one kernel call: ``softmax(scale q k^T [causal]) v``.

Built from operators, a small model's attention is two batched products and a softmax:
NumPy runs a batched product as one small GEMM per head on one thread (64 heads of
64x32 @ 32x64 in GPT-mini: 270 us, PyTorch's ``bmm`` 142 us on 2 threads, 2026-12-05),
and the backward pass adds four more and the softmax gradient.  Here each head's
products go straight to NumPy's own ``cblas_sgemm`` (``lezero.kernels.cblas``) from a
Numba loop, with the softmax rows (``lezero.kernels.softmax``) in between while the head
is in cache, and the heads are split over threads (``run_parts``: one wake-up per call,
not per product).

Operands are float32 with a batch of ``(B1, B2)`` matrices (a 3-D operand has B1 = 1)
given by their base address, batch strides and row stride in elements; rows must be
contiguous (unit stride along the last axis).  That takes the head views GPT makes from
one (B, T, 3C) projection without a copy, and lets the results be written as (B, T,
heads, E) memory behind a (B, heads, T, E) view, so that the usual ``transpose(0, 2, 1,
3).reshape(B, T, C)`` after attention (and its gradient's before) copies nothing.  Per
head ``h``:

    forward    P = softmax(scale q k^T)   (kept: the backward reads it)     O = P v
    backward   dP = dO v^T    dV = P^T dO    dS = scale P (dP - rowsum(dP P))
               dQ = dS k      dK = dS^T q

``attention_forward_ref`` / ``attention_backward_ref`` are the NumPy references (also
what the kernels are tested against).
"""
import numpy as np

from lezero.kernels import jit
from lezero.kernels.cblas import NO_TRANS, ROW_MAJOR, TRANS
from lezero.kernels.softmax import _backward as _softmax_grad_rows
from lezero.kernels.softmax import _forward as _softmax_rows

__all__ = ["attention_forward_ref", "attention_backward_ref", "forward_heads",
           "backward_heads"]


def _causal_mask(xp, length, keys):
    return xp.arange(length)[:, None] >= xp.arange(keys)[None, :]


def attention_forward_ref(q, k, v, scale, causal):
    """(O, P) with NumPy (or CuPy) operators."""
    from lezero.cuda import get_array_module
    xp = get_array_module(q)
    s = (q @ k.swapaxes(-1, -2)) * float(scale)      # a Python float keeps the dtype
    if causal:
        s = xp.where(_causal_mask(xp, s.shape[-2], s.shape[-1]), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = xp.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v, p


def attention_backward_ref(q, k, v, p, do, scale):
    """(dQ, dK, dV) from the forward's P, with NumPy (or CuPy) operators."""
    dp = do @ v.swapaxes(-1, -2)
    dv = p.swapaxes(-1, -2) @ do
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * float(scale)
    return ds @ k, ds.swapaxes(-1, -2) @ q, dv


@jit(cache=True, nogil=True)
def _at(bases, strides, i, h, b2):
    """The address of head ``h``'s matrix in operand ``i`` (float32: 4 bytes an element)."""
    i1 = h // b2
    return bases[i] + 4 * (i1 * strides[i, 0] + (h - i1 * b2) * strides[i, 1])


@jit(cache=True, nogil=True)
def forward_heads(gemm, bases, strides, lds, dims, p, scores, b2, scale, causal, first, stop):
    """Heads [first, stop) of operands (q, k, v, out): ``p[h]`` (L, S) gets the
    probabilities and ``out`` the output.  ``bases`` (4,) are the operands' addresses,
    ``strides`` (4, 2) their batch strides and ``lds`` (4,) their row strides, in
    elements; ``dims`` = (E, Ev); ``scores`` (L, S) is scratch.  (The softmax reads the
    scores from another buffer than it writes: on one buffer LLVM's overlap check sends
    its loops to scalar code, 2.3x slower.)"""
    length, keys, depth, ev = p.shape[1], p.shape[2], dims[0], dims[1]
    for h in range(first, stop):
        ph = p[h]
        gemm(ROW_MAJOR, NO_TRANS, TRANS, length, keys, depth, np.float32(1.0),
             _at(bases, strides, 0, h, b2), lds[0], _at(bases, strides, 1, h, b2), lds[1],
             np.float32(0.0), scores.ctypes.data, keys)                 # S = q k^T
        _softmax_rows(scores, scale, length, causal, ph)
        gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, length, ev, keys, np.float32(1.0), ph.ctypes.data,
             keys, _at(bases, strides, 2, h, b2), lds[2], np.float32(0.0),
             _at(bases, strides, 3, h, b2), lds[3])                     # O = P v


@jit(cache=True, nogil=True)
def backward_heads(gemm, bases, strides, lds, dims, p, scratch, b2, scale, first, stop):
    """Heads [first, stop) of operands (q, k, v, dO, dQ, dK, dV), laid out as in
    ``forward_heads``, from the forward's ``p``; ``scratch`` (2, L, S)."""
    length, keys, depth, ev = p.shape[1], p.shape[2], dims[0], dims[1]
    one, zero = np.float32(1.0), np.float32(0.0)
    dp, ds = scratch[0], scratch[1]
    for h in range(first, stop):
        ph = p[h].ctypes.data
        q, k, v, do = (_at(bases, strides, 0, h, b2), _at(bases, strides, 1, h, b2),
                       _at(bases, strides, 2, h, b2), _at(bases, strides, 3, h, b2))
        gemm(ROW_MAJOR, NO_TRANS, TRANS, length, keys, ev, one, do, lds[3], v, lds[2], zero,
             dp.ctypes.data, keys)                                      # dP = dO v^T
        gemm(ROW_MAJOR, TRANS, NO_TRANS, keys, ev, length, one, ph, keys, do, lds[3], zero,
             _at(bases, strides, 6, h, b2), lds[6])                     # dV = P^T dO
        _softmax_grad_rows(p[h], dp, scale, ds)                         # dS
        gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, length, depth, keys, one, ds.ctypes.data, keys,
             k, lds[1], zero, _at(bases, strides, 4, h, b2), lds[4])    # dQ = dS k
        gemm(ROW_MAJOR, TRANS, NO_TRANS, keys, depth, length, one, ds.ctypes.data, keys, q,
             lds[0], zero, _at(bases, strides, 5, h, b2), lds[5])       # dK = dS^T q
