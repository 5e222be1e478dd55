"""Attention of every head in one kernel call: ``softmax(scale q k^T [causal]) v``.

Built from operators, a small model's attention is two batched products and a softmax:
NumPy runs a batched product as one small GEMM per head on one thread, and the backward
pass adds four more and the softmax gradient (docs/performance.md).  Here each head's
products go straight to NumPy's own ``cblas_sgemm`` (``lezero.runtime.openblas``) from a
Numba loop, with the softmax rows (``lezero.kernels.softmax``) in between while the head
is in cache, and the heads are split over threads by the runtime (``run_ranges``: one
wake-up per call, not per product).

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

from lezero.kernels import argcheck, enabled, jit
from lezero.kernels.softmax import _backward as _softmax_grad_rows
from lezero.kernels.softmax import _forward as _softmax_rows
from lezero.runtime import NO_TRANS, ROW_MAJOR, TRANS, is_small, policy, run_ranges, sgemm

__all__ = ["attention_forward_ref", "attention_backward_ref", "forward_heads",
           "backward_heads", "takes", "small_heads", "attention_forward", "attention_backward"]


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


# ----- drivers (NumPy arrays) ----------------------------------------------------------------

def _rows_ok(a):
    """float32, rows contiguous, batch and row strides non-negative whole elements."""
    s = a.strides
    return s[-1] == 4 and s[-2] >= 4 * a.shape[-1] and all(x >= 0 and x % 4 == 0
                                                           for x in s[:-1])


def takes(q, k, v):
    """Whether the kernels take these operands: float32 NumPy arrays, 3-D or 4-D with one
    batch shape, rows contiguous, Numba on and NumPy's ``cblas_sgemm`` found."""
    arrays = (q, k, v)
    return (all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays)
            and 3 <= q.ndim <= 4 and q.ndim == k.ndim == v.ndim
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
            and min(q.size, k.size, v.size) > 0 and all(_rows_ok(a) for a in arrays)
            and enabled(*arrays) and sgemm() is not None)


def check_operands(op, q, k, v):
    """What the kernels rely on, checked: float32 NumPy operands of 3 or 4 dims with one
    batch shape, q (..., L, E), k (..., S, E), v (..., S, Ev), none empty, rows contiguous
    (the products read them through raw pointers and row strides)."""
    argcheck.arrays(op, q=q, k=k, v=v)
    for name, a in (("q", q), ("k", k), ("v", v)):
        argcheck.dtype_is(op, name, a, np.float32)
        argcheck.ndim_is(op, name, a, 3, 4)
    if not (q.ndim == k.ndim == v.ndim and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
            and k.shape[-1] == q.shape[-1] and v.shape[-2] == k.shape[-2]
            and min(q.size, k.size, v.size) > 0):
        raise ValueError(f"{op}: q, k and v must be non-empty (..., L, E), (..., S, E) and "
                         f"(..., S, Ev) with one batch shape, got {q.shape}, {k.shape} and "
                         f"{v.shape}")
    for name, a in (("q", q), ("k", k), ("v", v)):
        if not _rows_ok(a):
            raise ValueError(f"{op}: {name} must have contiguous rows and non-negative "
                             f"batch strides, got strides {a.strides}")


def small_heads(q, k, v):
    """Whether each head's products are small: the kernels run a head's products on one
    BLAS thread, while a large product (one long sequence) runs faster on BLAS's threads."""
    return (is_small(q.shape[-2], q.shape[-1], k.shape[-2])
            and is_small(q.shape[-2], k.shape[-2], v.shape[-1]))


def _layout(arrays):
    """(base addresses, batch strides (n, 2), row strides (n,)) in elements."""
    strides = np.zeros((len(arrays), 2), dtype=np.int64)
    lds = np.zeros(len(arrays), dtype=np.int64)
    for i, a in enumerate(arrays):
        s = [x // 4 for x in a.strides]
        strides[i] = s[:2] if a.ndim == 4 else (s[0], 0)
        lds[i] = s[-2]
    return np.array([a.ctypes.data for a in arrays], dtype=np.int64), strides, lds


def _heads_last(shape):
    """A new float32 array of ``shape`` (..., heads, L, E) whose memory is (..., L, heads,
    E): ``transpose(0, 2, 1, 3)`` of it is contiguous."""
    if len(shape) != 4:
        return np.empty(shape, np.float32)
    b, h, length, e = shape
    return np.empty((b, length, h, e), np.float32).transpose(0, 2, 1, 3)


def _heads_last_together(shapes):
    """New float32 arrays of ``shapes`` (all 4-D (B, heads, L, E) of one shape): views of
    ONE buffer (B, L, n, heads, E).  Undoing the model's ``reshape`` and ``transpose`` of
    a fused q/k/v projection (B, L, 3 * heads * E) then gives three slices of a buffer of
    exactly that shape, which ``split``'s backward joins without copying."""
    if len(set(shapes)) != 1 or len(shapes[0]) != 4:
        return [_heads_last(s) for s in shapes]
    b, h, length, e = shapes[0]
    buf = np.empty((b, length, len(shapes), h, e), np.float32)
    return [buf[:, :, i].transpose(0, 2, 1, 3) for i in range(len(shapes))]


def _run(kernel, heads, flops, scratch_shape, *args):
    """``kernel(gemm, *args, scratch, first, stop)`` over ranges of the heads, each with
    its own scratch, on as many threads as the runtime's policy pays for."""
    gemm = sgemm()
    run_ranges(lambda lo, hi: kernel(gemm, *args, np.empty(scratch_shape, np.float32), lo, hi),
               heads, flops, policy.attention_min_part_flops)


def attention_forward(q, k, v, scale, causal):
    """(O, P) by the kernels (operands that ``takes`` accepts); O is heads-last in memory,
    P (heads, L, S) is what ``attention_backward`` reads."""
    check_operands("attention_forward", q, k, v)
    heads = int(np.prod(q.shape[:-2]))
    length, keys, depth, ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    out = _heads_last(q.shape[:-1] + (ev,))
    p = np.empty((heads, length, keys), np.float32)
    b2 = q.shape[1] if q.ndim == 4 else 1

    def kernel(gemm, bases, strides, lds, scores, first, stop):
        forward_heads(gemm, bases, strides, lds, np.array([depth, ev], np.int64), p, scores,
                      b2, np.float32(scale), bool(causal), first, stop)
    _run(kernel, heads, 2.0 * heads * length * keys * (depth + ev), (length, keys),
         *_layout((q, k, v, out)))
    return out, p


def attention_backward(q, k, v, p, do, scale):
    """(dQ, dK, dV), heads-last in memory, from ``attention_forward``'s P."""
    op = "attention_backward"
    check_operands(op, q, k, v)
    argcheck.arrays(op, p=p, do=do)
    depth, ev = q.shape[-1], v.shape[-1]
    heads, length, keys = int(np.prod(q.shape[:-2])), q.shape[-2], k.shape[-2]
    argcheck.shape_is(op, "p", p, (heads, length, keys))
    argcheck.dtype_is(op, "p", p, np.float32)
    argcheck.c_contiguous(op, "p", p)        # read through its address, rows of S
    argcheck.shape_is(op, "do", do, q.shape[:-1] + (ev,))
    if not (do.dtype == np.float32 and _rows_ok(do)):
        do = np.ascontiguousarray(do, dtype=np.float32)
    grads = _heads_last_together([a.shape for a in (q, k, v)])
    b2 = q.shape[1] if q.ndim == 4 else 1

    def kernel(gemm, bases, strides, lds, scratch, first, stop):
        backward_heads(gemm, bases, strides, lds, np.array([depth, ev], np.int64), p, scratch,
                       b2, np.float32(scale), first, stop)
    _run(kernel, heads, 4.0 * heads * length * keys * (depth + ev), (2, length, keys),
         *_layout((q, k, v, do, *grads)))
    return tuple(grads)
