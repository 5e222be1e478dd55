"""The fused path of ``scaled_dot_product_attention``: every head's attention in one call
of ``lezero.kernels.attention`` (float32 NumPy operands, no mask but the causal one, no
dropout), split over threads by heads.

``FusedAttention`` keeps the probabilities for its backward, as the plain path does.
Its first-order gradient comes from the kernel; under ``create_graph`` the backward is
written with LeZero operators instead (the plain path's formulas), so attention can
still be differentiated twice.
"""
import numpy as np

from lezero.core import Function, get_config
from lezero.kernels import attention as attention_kernels
from lezero.kernels import enabled
from lezero.kernels.blas import is_small
from lezero.kernels.cblas import sgemm
from lezero.kernels.threads import run_parts, split, threads_for
from lezero.functions.attention.masked_softmax import MaskedSoftmax, MaskedSoftmaxGrad
from lezero.functions.linalg import matmul
from lezero.functions.shape import swapaxes

__all__ = ["FusedAttention", "fits"]

# Heads are split over threads when each part gets at least this many flops (a part
# costs a thread wake-up, ~50-70 us here, against ~15 us per MFLOP of small GEMMs).
MIN_PART_FLOPS = 4e6


def _rows_ok(a):
    """float32, rows contiguous, batch and row strides non-negative whole elements."""
    s = a.strides
    return (a.strides[-1] == 4 and s[-2] >= 4 * a.shape[-1]
            and all(x >= 0 and x % 4 == 0 for x in s[:-2]))


def fits(q, k, v, mask_add, keep, dropout_p):
    """Whether the fused path takes these raw operands and options: also, each head's
    products must be small -- the kernel runs a head's products on one BLAS thread,
    while a large product (one long sequence) runs faster on BLAS's threads."""
    return (mask_add is None and keep is None and dropout_p == 0 and _kernel_takes(q, k, v)
            and is_small(q.shape[-2], q.shape[-1], k.shape[-2])
            and is_small(q.shape[-2], k.shape[-2], v.shape[-1]))


def _kernel_takes(*arrays):
    q, k, v = arrays[:3]
    return (all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays)
            and 3 <= q.ndim <= 4 and q.ndim == k.ndim == v.ndim
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
            and min(q.size, k.size, v.size) > 0 and all(_rows_ok(a) for a in arrays)
            and enabled(*arrays) and sgemm() is not None)


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
    E): ``transpose(0, 2, 1, 3)`` of it is contiguous (see ``lezero.kernels.attention``)."""
    if len(shape) != 4:
        return np.empty(shape, np.float32)
    b, h, length, e = shape
    return np.empty((b, length, h, e), np.float32).transpose(0, 2, 1, 3)


def _b2(q):
    """The inner batch size of the (B1, B2) heads (1 for 3-D operands)."""
    return q.shape[1] if q.ndim == 4 else 1


def _run(part, parts):
    """``part(i)`` for every part: on the thread pool when there are several."""
    if parts > 1:
        run_parts(part, parts)
    else:
        part(0)


class FusedAttention(Function):
    """softmax(scale q k^T [causal]) v over every (batch, head) of q (..., L, E),
    k (..., S, E), v (..., S, Ev) with equal batch dims."""

    def __init__(self, scale, causal):
        self.scale, self.causal = np.float32(scale), bool(causal)

    def _parts(self, heads, flops):
        return threads_for(heads, flops, MIN_PART_FLOPS)

    def forward(self, q, k, v):
        self.p = None
        if not _kernel_takes(q, k, v):
            # what the kernel does not take -- autocast's lower precision, a graph replayed
            # on other arrays -- runs the NumPy/CuPy reference, forward and backward
            out, self.p_ref = attention_kernels.attention_forward_ref(q, k, v, self.scale,
                                                                      self.causal)
            return out
        heads = int(np.prod(q.shape[:-2]))
        length, keys, depth, ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        out = _heads_last(q.shape[:-1] + (ev,))
        layout = _layout((q, k, v, out))
        self.p = np.empty((heads, length, keys), np.float32)
        parts = self._parts(heads, 2.0 * heads * length * keys * (depth + ev))
        bounds, scores = split(heads, parts), np.empty((parts, length, keys), np.float32)
        dims, b2, gemm = np.array([depth, ev], np.int64), _b2(q), sgemm()

        def part(i):
            attention_kernels.forward_heads(gemm, *layout, dims, self.p, scores[i], b2,
                                            self.scale, self.causal, *bounds[i])
        _run(part, parts)
        return out

    def backward(self, go):
        if get_config().enable_backprop:        # create_graph: differentiable operators
            return self._graph_backward(go)
        q, k, v = (x.data for x in self.inputs)
        do = go.data
        if self.p is None:
            return attention_kernels.attention_backward_ref(q, k, v, self.p_ref, do,
                                                            self.scale)
        if not (do.dtype == np.float32 and _rows_ok(do)):
            do = np.ascontiguousarray(do, dtype=np.float32)
        heads, (length, keys) = self.p.shape[0], self.p.shape[1:]
        depth, ev = q.shape[-1], v.shape[-1]
        grads = [_heads_last(a.shape) for a in (q, k, v)]
        layout = _layout((q, k, v, do, *grads))
        parts = self._parts(heads, 4.0 * heads * length * keys * (depth + ev))
        bounds, scratch = split(heads, parts), np.empty((parts, 2, length, keys), np.float32)
        dims, b2, gemm = np.array([depth, ev], np.int64), _b2(q), sgemm()

        def part(i):
            attention_kernels.backward_heads(gemm, *layout, dims, self.p, scratch[i], b2,
                                             self.scale, *bounds[i])
        _run(part, parts)
        return tuple(grads)
    def _graph_backward(self, go):
        q, k, v = self.inputs
        p = MaskedSoftmax(None, float(self.scale), self.causal)(matmul(q, swapaxes(k, -1, -2)))
        ds = MaskedSoftmaxGrad(float(self.scale))(p, matmul(go, swapaxes(v, -1, -2)))
        return matmul(ds, k), matmul(swapaxes(ds, -1, -2), q), matmul(swapaxes(p, -1, -2), go)
