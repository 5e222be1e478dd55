"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward``.

``scaled_dot_product_attention`` has two paths with the same results:

* plain -- scores, masked softmax, dropout and the weighted sum built from LeZero
  operators, so it is differentiable twice; it holds the (L, S) score matrix of every
  batch element and head;
* chunked -- one Function that walks the queries in blocks of rows.  Forward keeps only
  each row's log-sum-exp; backward recomputes a block's probabilities from it (the
  FlashAttention recipe, blockwise on whole key rows).  Memory is O(block * S) instead of
  O(L * S): it grows linearly with the sequence, not with its square.  Its gradient is
  exact but not differentiable again.

``chunk_size=None`` picks the chunked path when the score matrices would exceed
``AUTO_CHUNK_BYTES``; ``chunk_size=0`` forces the plain path; a positive int forces
chunks of that many query rows.

Masks follow PyTorch: in ``scaled_dot_product_attention`` a bool mask keeps the
positions where it is True and a float mask is added to the scores; in
``multi_head_attention_forward`` a bool ``attn_mask`` / ``key_padding_mask`` marks the
positions to *ignore*.  A query row that may attend to nothing gives zeros (as
PyTorch's scaled_dot_product_attention does), never NaN.
"""
import math

import numpy as np

from lezero.core import Function, Variable, get_config
from lezero.core import get_rng
from lezero.functions.attention.masked_softmax import MaskedSoftmax
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.linalg import linear, matmul
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import (broadcast_to, concatenate, get_item, reshape, swapaxes,
                                    transpose)
from lezero.utils.checks import check_array, check_bool, check_float_array

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

AUTO_CHUNK_BYTES = 32 << 20     # score matrices larger than this take the chunked path
BLOCK_SCORES = 1 << 21          # scores per block in the chunked path (8 MiB in float32)


# ----- the plain path ----------------------------------------------------------------------

def _dropout_scale(xp, rng, shape, p, dtype):
    """Inverted-dropout multipliers: 0 with probability p, else 1 / (1 - p)."""
    if p >= 1:
        return xp.zeros(shape, dtype=dtype)
    return ((rng.random(shape) >= p) / (1.0 - p)).astype(dtype)


def _plain_attention(q, k, v, mask_add, keep, dropout_p, scale, causal=False):
    """(output, attention weights) from LeZero operators."""
    s = matmul(q, swapaxes(k, -1, -2))
    if mask_add is not None:     # the mask adds to the scaled scores
        s, scale = s * scale + mask_add, 1.0
    p = MaskedSoftmax(keep, scale, causal)(s)
    if dropout_p > 0:
        xp = xp_of(p)
        p = p * as_variable(_dropout_scale(xp, get_rng(xp), p.shape, dropout_p, p.dtype))
    return matmul(p, v), p


# ----- the chunked path ---------------------------------------------------------------------

def swapaxes_array(a):
    """The last two axes of a raw array swapped (a view)."""
    return a.swapaxes(-1, -2)


def _block_rng(xp, seed, block):
    """A generator for one block's dropout mask, the same in forward and backward."""
    if xp is np:
        return np.random.default_rng([seed, block])
    return xp.random.default_rng(seed * 1000003 + block)


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
        return _dropout_scale(xp, _block_rng(xp, self.seed, i), shape, self.dropout_p, dtype)

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
        if get_config().enable_backprop:
            # create_graph: record a node that refuses to be differentiated again.
            grads = ChunkedAttentionGrad(self)(go, *self.inputs)
        else:
            grads = self.gradients(go.data)
        return tuple(g if need else None for g, need in zip(grads, self.needs_input_grad))

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


# ----- scaled_dot_product_attention ---------------------------------------------------------

def _check_mask(op, name, mask, target, dtype):
    """A bool mask (returned as a keep array) or a float mask (returned as an additive
    Variable or array); either must broadcast to ``target``."""
    arr = check_array(op, name, mask)
    try:
        ok = np.broadcast_shapes(arr.shape, target) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: {name} of shape {arr.shape} does not broadcast to the "
                         f"attention scores' shape {tuple(target)}")
    if arr.dtype == np.bool_:
        return None, arr
    if arr.dtype.kind != "f":
        raise TypeError(f"{op}: {name} must be bool or floating point, got dtype {arr.dtype}")
    if arr.dtype != dtype:
        if isinstance(mask, Variable) and mask.requires_grad:
            raise TypeError(f"{op}: {name} has dtype {arr.dtype} but query has {dtype}")
        mask = arr.astype(dtype)
    return mask, None


def _expand_heads(op, q, x, name):
    """Grouped-query attention: repeat the key/value heads (axis -3) to match query's."""
    hq, hk = data_of(q).shape[-3], data_of(x).shape[-3]
    if hq % hk:
        raise ValueError(f"{op}: with enable_gqa, query's {hq} heads must be a multiple of "
                         f"{name}'s {hk}")
    index = xp_of(x).arange(hq) // (hq // hk)
    return get_item(x, (Ellipsis, index, slice(None), slice(None)))


@register("attention", notes="chunked path: O(L) memory, first-order only")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 chunk_size=None):
    """softmax(query @ key^T * scale + mask) @ value over the last two axes.

    ``query (..., L, E)``, ``key (..., S, E)``, ``value (..., S, Ev)`` -> ``(..., L, Ev)``;
    batch dims broadcast.  ``attn_mask``: bool (True = attend) or float (added), broadcast
    to (..., L, S).  ``is_causal``: row i attends to columns <= i.  ``scale`` defaults to
    1 / sqrt(E).  Dropout (``dropout_p``) draws from the process generator.
    ``chunk_size``: None (automatic), 0 (plain path) or the query rows per chunk.
    """
    op = "scaled_dot_product_attention"
    q, k, v = (check_float_array(op, n, a) for n, a in (("query", query), ("key", key),
                                                  ("value", value)))
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{op}: query, key and value need at least 2 dims, got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{op}: query, key and value must share a dtype, got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{op}: expected query (..., L, E), key (..., S, E), value "
                         f"(..., S, Ev); got {q.shape}, {k.shape}, {v.shape}")
    if enable_gqa:
        if min(q.ndim, k.ndim, v.ndim) < 3:
            raise ValueError(f"{op}: enable_gqa needs (..., heads, L, E) inputs")
        key, value = _expand_heads(op, query, key, "key"), _expand_heads(op, query, value,
                                                                         "value")
        k, v = data_of(key), data_of(value)
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: batch dims of query {q.shape}, key {k.shape} and value "
                         f"{v.shape} do not broadcast") from None
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"{op}: is_causal must be a bool, got {is_causal!r}")
    if not 0 <= dropout_p < 1:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    elif isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)):
        raise TypeError(f"{op}: scale must be a number or None, got {scale!r}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(
            chunk_size, (int, np.integer)) or chunk_size < 0):
        raise ValueError(f"{op}: chunk_size must be None or an int >= 0, got {chunk_size!r}")
    L, S = q.shape[-2], k.shape[-2]
    target = batch + (L, S)
    mask_add = keep = None
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{op}: pass either attn_mask or is_causal=True, not both")
        mask_add, keep = _check_mask(op, "attn_mask", attn_mask, target, q.dtype)

    xp = xp_of(q)
    n_scores = math.prod(target)
    if chunk_size is None:
        chunked = n_scores * q.dtype.itemsize > AUTO_CHUNK_BYTES
        chunk_size = max(1, BLOCK_SCORES // max(1, n_scores // L))
    else:
        chunked = chunk_size > 0
    if chunked and isinstance(mask_add, Variable) and mask_add.requires_grad:
        chunked = False        # only the plain path gives a float mask its gradient
    if not chunked:
        return _plain_attention(query, key, value, mask_add, keep, dropout_p, scale,
                                is_causal)[0]
    query, key, value = (broadcast_to(a, batch + data_of(a).shape[-2:])
                         for a in (query, key, value))
    add = None if mask_add is None else xp.broadcast_to(data_of(mask_add), target)
    keep = None if keep is None else xp.broadcast_to(keep, target)
    return ChunkedAttention(scale, add, keep, is_causal, dropout_p, min(chunk_size, L))(
        query, key, value)


# ----- multi_head_attention_forward ---------------------------------------------------------

def _additive(op, name, mask, dtype):
    """PyTorch's canonical mask: bool True (ignore) -> -inf, float kept (cast to dtype)."""
    if mask is None:
        return None
    arr = check_array(op, name, mask)
    if arr.dtype == np.bool_:
        return as_variable(xp_of(arr).where(arr, -np.inf, 0.0).astype(dtype))
    if arr.dtype.kind != "f":
        raise TypeError(f"{op}: {name} must be bool or floating point, got dtype {arr.dtype}")
    return mask if arr.dtype == dtype else as_variable(arr.astype(dtype))


def _pad_last(x, xp, dtype):
    """Append one zero column to a mask (for bias_k / add_zero_attn)."""
    if x is None:
        return None
    shape = x.shape[:-1] + (1,)
    return concatenate([x, as_variable(xp.zeros(shape, dtype=dtype))], axis=-1)


def _check_int(op, name, value, minimum):
    """Raise unless ``value`` is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value}")


def _check_weight(op, name, w, shape):
    """Raise unless ``w`` is a float array of ``shape``."""
    arr = check_float_array(op, name, w)
    if arr.shape != shape:
        raise ValueError(f"{op}: {name} must have shape {shape}, got {arr.shape}")


def _check_mha_arguments(op, qa, ka, va, embed_dim_to_check, num_heads, in_proj_weight,
                         in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                         out_proj_weight, out_proj_bias, use_separate_proj_weight,
                         q_proj_weight, k_proj_weight, v_proj_weight, statics, flags):
    """The argument checks of ``multi_head_attention_forward`` (query, key and value are
    already known to be float arrays of matching rank), before any computation."""
    embed = qa.shape[-1]
    _check_int(op, "embed_dim_to_check", embed_dim_to_check, 1)
    if embed != embed_dim_to_check:
        raise ValueError(f"{op}: query's embedding dim {embed} != embed_dim_to_check "
                         f"{embed_dim_to_check}")
    _check_int(op, "num_heads", num_heads, 1)
    if embed % num_heads:
        raise ValueError(f"{op}: embed_dim {embed} is not divisible by num_heads {num_heads}")
    check_bool(op, "add_zero_attn", add_zero_attn)
    for name, value in flags.items():
        check_bool(op, name, value)
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float, np.number)):
        raise TypeError(f"{op}: dropout_p must be a number, got {type(dropout_p).__name__}")
    if not 0 <= dropout_p <= 1:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")

    if use_separate_proj_weight:
        for name, w, width in (("q_proj_weight", q_proj_weight, embed),
                               ("k_proj_weight", k_proj_weight, ka.shape[-1]),
                               ("v_proj_weight", v_proj_weight, va.shape[-1])):
            if w is None:
                raise ValueError(f"{op}: use_separate_proj_weight needs q/k/v_proj_weight, "
                                 f"got {name}=None")
            _check_weight(op, name, w, (embed, width))
    else:
        if in_proj_weight is None:
            raise ValueError(f"{op}: in_proj_weight is needed unless "
                             f"use_separate_proj_weight")
        _check_weight(op, "in_proj_weight", in_proj_weight, (3 * embed, embed))
    if in_proj_bias is not None:
        _check_weight(op, "in_proj_bias", in_proj_bias, (3 * embed,))
    for name, b in (("bias_k", bias_k), ("bias_v", bias_v)):
        if b is not None:
            arr = check_float_array(op, name, b)
            if arr.ndim > 3 or arr.size != embed or arr.shape[-1:] != (embed,):
                raise ValueError(f"{op}: {name} must hold one {embed}-vector, shaped "
                                 f"(1, 1, {embed}) or ({embed},); got {arr.shape}")
    if (bias_k is None) != (bias_v is None):
        raise ValueError(f"{op}: give both bias_k and bias_v or neither")
    for name, t in statics.items():
        if t is not None and check_float_array(op, name, t).ndim != 3:
            raise ValueError(f"{op}: {name} must be (N * num_heads, S, head_dim), got shape "
                             f"{data_of(t).shape}")
    _check_weight(op, "out_proj_weight", out_proj_weight, (embed, embed))
    if out_proj_bias is not None:
        _check_weight(op, "out_proj_bias", out_proj_bias, (embed,))


def _split_heads(x, n_heads, head_dim):
    """(S, N, E) -> (N * heads, S, head_dim)."""
    s, n = x.shape[:2]
    return transpose(reshape(x, (s, n * n_heads, head_dim)), (1, 0, 2))


@register("attention", notes="(L, N, E) layout")
def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention as ``torch.nn.MultiheadAttention`` computes it.

    ``query (L, N, E)``, ``key (S, N, kdim)``, ``value (S, N, vdim)`` (or unbatched
    without N).  Returns ``(output (L, N, E), weights)``: the weights are (N, L, S)
    averaged over heads, (N, heads, L, S) otherwise, or None unless ``need_weights``.
    """
    op = "multi_head_attention_forward"
    qa, ka, va = (check_float_array(op, n, a) for n, a in (("query", query), ("key", key),
                                                     ("value", value)))
    if qa.ndim not in (2, 3) or ka.ndim != qa.ndim or va.ndim != qa.ndim:
        raise ValueError(f"{op}: query, key and value must all be (L, N, E) or all unbatched "
                         f"(L, E); got shapes {qa.shape}, {ka.shape}, {va.shape}")
    _check_mha_arguments(op, qa, ka, va, embed_dim_to_check, num_heads, in_proj_weight,
                         in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                         out_proj_weight, out_proj_bias, use_separate_proj_weight,
                         q_proj_weight, k_proj_weight, v_proj_weight,
                         dict(static_k=static_k, static_v=static_v),
                         dict(training=training, need_weights=need_weights,
                              use_separate_proj_weight=use_separate_proj_weight,
                              average_attn_weights=average_attn_weights,
                              is_causal=is_causal))
    batched = qa.ndim == 3
    if not batched:
        query, key, value = (reshape(a, (a.shape[0], 1, a.shape[1]))
                             for a in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = reshape(key_padding_mask, (1, -1)) if isinstance(
                key_padding_mask, Variable) else data_of(key_padding_mask).reshape(1, -1)
    tgt_len, bsz, embed = data_of(query).shape
    src_len = data_of(key).shape[0]
    if data_of(key).shape[:2] != data_of(value).shape[:2] or data_of(key).shape[1] != bsz:
        raise ValueError(f"{op}: key {data_of(key).shape} and value {data_of(value).shape} "
                         f"must be (S, N, *) with N = {bsz}")
    if is_causal and attn_mask is None:
        raise ValueError(f"{op}: is_causal is a hint that attn_mask is causal; pass attn_mask")
    head_dim = embed // num_heads
    dtype, xp = qa.dtype, xp_of(qa)

    # input projections
    if use_separate_proj_weight:
        ws = [q_proj_weight, k_proj_weight, v_proj_weight]
    else:
        ws = [get_item(in_proj_weight, slice(i * embed, (i + 1) * embed)) for i in range(3)]
    bs = [None] * 3 if in_proj_bias is None else \
        [get_item(in_proj_bias, slice(i * embed, (i + 1) * embed)) for i in range(3)]
    q, k, v = (linear(a, w, b) for a, w, b in zip((query, key, value), ws, bs))

    # masks: additive floats, attn_mask as (1 or N * heads, L, S)
    attn_mask = _additive(op, "attn_mask", attn_mask, dtype)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if attn_mask.shape != (tgt_len, src_len):
                raise ValueError(f"{op}: 2-D attn_mask must be {(tgt_len, src_len)}, got "
                                 f"{attn_mask.shape}")
            attn_mask = reshape(attn_mask, (1, tgt_len, src_len))
        elif attn_mask.shape != (bsz * num_heads, tgt_len, src_len):
            raise ValueError(f"{op}: 3-D attn_mask must be "
                             f"{(bsz * num_heads, tgt_len, src_len)}, got {attn_mask.shape}")
    key_padding_mask = _additive(op, "key_padding_mask", key_padding_mask, dtype)
    if key_padding_mask is not None and key_padding_mask.shape != (bsz, src_len):
        raise ValueError(f"{op}: key_padding_mask must be {(bsz, src_len)}, got "
                         f"{key_padding_mask.shape}")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{op}: bias_k/bias_v cannot be used with static_k/static_v")
        k = concatenate([k, broadcast_to(bias_k, (1, bsz, embed))], axis=0)
        v = concatenate([v, broadcast_to(bias_v, (1, bsz, embed))], axis=0)
        attn_mask, key_padding_mask = (_pad_last(m, xp, dtype)
                                       for m in (attn_mask, key_padding_mask))

    q = _split_heads(q, num_heads, head_dim)
    k = _split_heads(k, num_heads, head_dim) if static_k is None else static_k
    v = _split_heads(v, num_heads, head_dim) if static_v is None else static_v
    for name, t in (("static_k", k), ("static_v", v)):
        if data_of(t).shape[0] != bsz * num_heads or data_of(t).shape[2] != head_dim:
            raise ValueError(f"{op}: {name} must be {(bsz * num_heads, '*', head_dim)}, got "
                             f"{data_of(t).shape}")
    if add_zero_attn:
        zeros = as_variable(xp.zeros((bsz * num_heads, 1, head_dim), dtype=dtype))
        k, v = concatenate([k, zeros], axis=1), concatenate([v, zeros], axis=1)
        attn_mask, key_padding_mask = (_pad_last(m, xp, dtype)
                                       for m in (attn_mask, key_padding_mask))
    src_len = data_of(k).shape[1]
    if key_padding_mask is not None:
        kpm = broadcast_to(reshape(key_padding_mask, (bsz, 1, 1, src_len)),
                           (bsz, num_heads, 1, src_len))
        kpm = reshape(kpm, (bsz * num_heads, 1, src_len))
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    if need_weights or dropout_p == 1:      # scaled_dot_product_attention takes p < 1
        out, weights = _plain_attention(q, k, v, attn_mask, None, dropout_p,
                                        1.0 / math.sqrt(head_dim))
        weights = weights if need_weights else None
    else:
        out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p)
        weights = None
    out = reshape(transpose(out, (1, 0, 2)), (tgt_len * bsz, embed))
    out = reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, embed))
    if weights is not None:
        weights = reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = _sum(weights, axis=1) * (1.0 / num_heads)
        if not batched:
            weights = reshape(weights, weights.shape[1:])
    if not batched:
        out = reshape(out, (tgt_len, embed))
    return out, weights
