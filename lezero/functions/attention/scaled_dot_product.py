"""``scaled_dot_product_attention``: softmax(q k^T * scale + mask) v, two paths with the
same results.

* plain -- scores, masked softmax, dropout and the weighted sum built from LeZero
  operators, so it is differentiable twice; it holds the (L, S) score matrix of every
  batch element and head;
* chunked -- ``ChunkedAttention`` (``chunked.py``): blocks of query rows, O(L) memory, a
  gradient that is exact but not differentiable again.

``chunk_size=None`` picks the chunked path when the score matrices would exceed
``AUTO_CHUNK_BYTES``; ``chunk_size=0`` forces the plain path; a positive int forces
chunks of that many query rows.

Masks follow PyTorch: a bool mask keeps the positions where it is True and a float mask
is added to the scores.  A query row that may attend to nothing gives zeros (as PyTorch's
scaled_dot_product_attention does), never NaN.
"""
import math

import numpy as np

from lezero.core import Variable
from lezero.random import get_rng
from lezero.functions.attention import fused
from lezero.functions.attention.chunked import ChunkedAttention
from lezero.functions.attention.fused import FusedAttention
from lezero.functions.attention.masked_softmax import MaskedSoftmax
from lezero.functions.common import data_of, xp_of
from lezero.functions.linalg import matmul
from lezero.functions.stochastic import ScaleShift
from lezero.functions.registry import register
from lezero.functions.shape import broadcast_to, get_item, swapaxes
from lezero.utils.checks import (check_array, check_bool, check_float_array, check_int,
                                 check_number)

__all__ = ["scaled_dot_product_attention", "plain_attention"]

AUTO_CHUNK_BYTES = 32 << 20     # score matrices larger than this take the chunked path
BLOCK_SCORES = 1 << 21          # scores per block in the chunked path (8 MiB in float32)


def plain_attention(q, k, v, mask_add, keep, dropout_p, scale, causal=False):
    """(output, attention weights) from LeZero operators (differentiable twice)."""
    s = matmul(q, swapaxes(k, -1, -2))
    if mask_add is not None:     # the mask adds to the scaled scores
        s, scale = s * scale + mask_add, 1.0
    p = MaskedSoftmax(keep, scale, causal)(s)
    if dropout_p > 0:
        keep_mask = get_rng(xp_of(p)).random(p.shape) >= dropout_p    # held as bool
        p = ScaleShift(keep_mask, None, 1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0)(p)
    return matmul(p, v), p


# ----- argument checks ----------------------------------------------------------------------

def _check_qkv(op, query, key, value):
    """The three float arrays, of one dtype and shapes (..., L, E), (..., S, E), (..., S, Ev)."""
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
    return q, k, v


def _check_options(op, q, is_causal, dropout_p, scale, chunk_size):
    """The scalar arguments; returns the scale (1 / sqrt(E) by default)."""
    check_bool(op, "is_causal", is_causal)
    check_number(op, "dropout_p", dropout_p, 0, 1, high_open=True)
    check_int(op, "chunk_size", chunk_size, low=0, allow_none=True)
    if scale is None:
        return 1.0 / math.sqrt(q.shape[-1])
    return check_number(op, "scale", scale)


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


def _batch_dims(op, q, k, v):
    try:
        return np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: batch dims of query {q.shape}, key {k.shape} and value "
                         f"{v.shape} do not broadcast") from None


def _chunking(q, target, chunk_size, mask_add):
    """(chunked?, query rows per chunk) for scores of shape ``target``."""
    n_scores, rows = math.prod(target), target[-2]
    if chunk_size is None:
        chunked = n_scores * q.dtype.itemsize > AUTO_CHUNK_BYTES
        chunk_size = max(1, BLOCK_SCORES // max(1, n_scores // rows))
    else:
        chunked = chunk_size > 0
    if chunked and isinstance(mask_add, Variable) and mask_add.requires_grad:
        chunked = False        # only the plain path gives a float mask its gradient
    return chunked, min(chunk_size, rows)


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
    q, k, v = _check_qkv(op, query, key, value)
    if enable_gqa:
        if min(q.ndim, k.ndim, v.ndim) < 3:
            raise ValueError(f"{op}: enable_gqa needs (..., heads, L, E) inputs")
        key, value = (_expand_heads(op, query, key, "key"),
                      _expand_heads(op, query, value, "value"))
        k, v = data_of(key), data_of(value)
    batch = _batch_dims(op, q, k, v)
    scale = _check_options(op, q, is_causal, dropout_p, scale, chunk_size)
    target = batch + (q.shape[-2], k.shape[-2])
    mask_add = keep = None
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{op}: pass either attn_mask or is_causal=True, not both")
        mask_add, keep = _check_mask(op, "attn_mask", attn_mask, target, q.dtype)

    chunked, rows = _chunking(q, target, chunk_size, mask_add)
    if not chunked and not chunk_size == 0 and fused.fits(q, k, v, mask_add, keep, dropout_p):
        return FusedAttention(scale, is_causal)(query, key, value)
    if not chunked:
        return plain_attention(query, key, value, mask_add, keep, dropout_p, scale,
                               is_causal)[0]
    xp = xp_of(q)
    query, key, value = (broadcast_to(a, batch + data_of(a).shape[-2:])
                         for a in (query, key, value))
    add = None if mask_add is None else xp.broadcast_to(data_of(mask_add), target)
    keep = None if keep is None else xp.broadcast_to(keep, target)
    return ChunkedAttention(scale, add, keep, is_causal, dropout_p, rows)(query, key, value)
