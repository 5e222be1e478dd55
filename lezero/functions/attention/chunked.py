"""The chunked path of ``scaled_dot_product_attention``: one Function that walks the
queries in blocks of rows.

Forward keeps only each row's log-sum-exp; backward recomputes a block's probabilities
from it (the FlashAttention recipe, blockwise on whole key rows).  Memory is
O(block * S) instead of O(L * S): it grows linearly with the sequence, not with its
square.  The gradient is exact but not differentiable again (``ChunkedAttentionGrad``
says so when asked).
"""
import numpy as np

from lezero.backends import of_namespace
from lezero.core import Function
from lezero.random import get_rng
from lezero.functions.common import xp_of

__all__ = ["ChunkedAttention", "dropout_scale"]


def dropout_scale(xp, rng, shape, p, dtype):
    """Inverted-dropout multipliers: 0 with probability p, else 1 / (1 - p)."""
    if p >= 1:
        return xp.zeros(shape, dtype=dtype)
    return ((rng.random(shape) >= p) / (1.0 - p)).astype(dtype)


def swapaxes_array(a):
    """The last two axes of a raw array swapped (a view)."""
    return a.swapaxes(-1, -2)


def _block_rng(xp, seed, block):
    """A generator for one block's dropout mask, the same in forward and backward (the
    backend's own, seeded from the call's seed and the block)."""
    return of_namespace(xp).rng((seed * 1_000_003 + block) % 2**63)


class ChunkedAttention(Function):
    """Attention over blocks of query rows with the softmax statistics kept per row.

    Inputs ``q (..., L, E), k (..., S, E), v (..., S, Ev)`` share their batch dims.
    ``mask_add`` / ``keep`` are constant arrays broadcast to (..., L, S) (or None).
    """

    def __init__(self, scale, mask_add, keep, causal, dropout_p, block):
        self.scale, self.mask_add, self.keep = scale, mask_add, keep
        self.causal, self.dropout_p, self.block = causal, dropout_p, block

    def _blocks(self, length, keys):
        """(index, first row, end row, end key) of each block.  With a causal mask the
        rows a..b-1 see only keys 0..b-1, so later keys are never computed."""
        return [(i, a, min(a + self.block, length),
                 min(a + self.block, keys) if self.causal else keys)
                for i, a in enumerate(range(0, length, self.block))]

    def _scores(self, xp, q, k, a, b, e):
        s = q[..., a:b, :] @ swapaxes_array(k[..., :e, :])
        s *= self.scale
        if self.mask_add is not None:
            s += self.mask_add[..., a:b, :e]
        if self.keep is not None:
            s = xp.where(self.keep[..., a:b, :e], s, -np.inf)
        if self.causal:
            s = xp.where(xp.arange(a, b)[:, None] >= xp.arange(e)[None, :], s, -np.inf)
        return s

    def _dropout(self, xp, i, shape, dtype):
        return dropout_scale(xp, _block_rng(xp, self.seed, i), shape, self.dropout_p, dtype)

    def forward(self, q, k, v):
        xp = xp_of(q)
        if self.dropout_p > 0:
            self.seed = int(get_rng(xp).integers(2 ** 62))
        out = xp.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
        self.lse = xp.empty(q.shape[:-1] + (1,), dtype=q.dtype)
        for i, a, b, e in self._blocks(q.shape[-2], k.shape[-2]):
            s = self._scores(xp, q, k, a, b, e)
            m = s.max(axis=-1, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0)
            s = xp.exp(s - m)
            d = s.sum(axis=-1, keepdims=True)
            d = xp.where(d == 0, 1, d)
            s /= d
            self.lse[..., a:b, :] = m + xp.log(d)
            if self.dropout_p > 0:
                s *= self._dropout(xp, i, s.shape, s.dtype)
            out[..., a:b, :] = s @ v[..., :e, :]
        return out

    def backward(self, go):
        # create_graph: record a node that refuses to be differentiated again.
        return tuple(ChunkedAttentionGrad(self)(go, *self.inputs))

    def backward_arrays(self, go):
        return self.gradients(go)

    def gradients(self, go):
        """Raw-array gradients of q, k, v, recomputing each block's probabilities."""
        q, k, v = (x.data for x in self.inputs)
        xp = xp_of(q)
        dq = xp.empty_like(q)
        dk = xp.zeros(k.shape, dtype=k.dtype)
        dv = xp.zeros(v.shape, dtype=v.dtype)
        for i, a, b, e in self._blocks(q.shape[-2], k.shape[-2]):
            p = xp.exp(self._scores(xp, q, k, a, b, e) - self.lse[..., a:b, :])
            g = go[..., a:b, :]
            dp = g @ swapaxes_array(v[..., :e, :])      # d(dropped p)
            if self.dropout_p > 0:
                drop = self._dropout(xp, i, p.shape, p.dtype)
                dv[..., :e, :] += swapaxes_array(p * drop) @ g
                dp *= drop
            else:
                dv[..., :e, :] += swapaxes_array(p) @ g
            # softmax backward: ds = p * (dp - sum(dp * p))
            dp -= (dp * p).sum(axis=-1, keepdims=True)
            dp *= p
            dp *= self.scale
            dq[..., a:b, :] = dp @ k[..., :e, :]
            dk[..., :e, :] += swapaxes_array(dp) @ q[..., a:b, :]
        return dq, dk, dv


class ChunkedAttentionGrad(Function):
    """The chunked path's gradient as a graph node (under create_graph); its inputs tie
    it to q, k, v, and differentiating it raises."""

    def __init__(self, attn):
        self.attn = attn

    def forward(self, go, q, k, v):
        return self.attn.gradients(go)

    def backward(self, *ggs):
        raise NotImplementedError(
            "scaled_dot_product_attention: the chunked path's gradient is not differentiable;"
            " pass chunk_size=0 (the plain path) to differentiate twice")
