"""``multi_head_attention_forward``: multi-head attention as ``torch.nn.MultiheadAttention``
computes it, in the (L, N, E) layout.

Every argument is checked before anything is computed: the scalars and weights
(``_check_arguments``), then the shapes of query, key, value, the masks and the static
keys (``_check_shapes``).  Only then come the input projections, the extra key/value
columns (bias_k/bias_v, add_zero_attn), the attention and the output projection.  A bool
``attn_mask`` / ``key_padding_mask`` marks the positions to *ignore* (PyTorch's rule).
"""
import math

import numpy as np

from lezero.core import Variable
from lezero.functions.attention.scaled_dot_product import (plain_attention,
                                                           scaled_dot_product_attention)
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.linalg import linear
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import broadcast_to, concatenate, get_item, reshape, transpose
from lezero.utils.checks import (check_array, check_bool, check_float_array, check_int,
                                 check_number)

__all__ = ["multi_head_attention_forward"]

OP = "multi_head_attention_forward"


# ----- checks --------------------------------------------------------------------------------

def _check_weights(qa, ka, va, in_proj_weight, in_proj_bias, bias_k, bias_v, out_proj_weight,
                   out_proj_bias, use_separate_proj_weight, separate):
    """Shapes of the projection weights and biases (float arrays)."""
    embed = qa.shape[-1]
    if use_separate_proj_weight:
        for (name, w), width in zip(separate.items(), (embed, ka.shape[-1], va.shape[-1])):
            if w is None:
                raise ValueError(f"{OP}: use_separate_proj_weight needs q/k/v_proj_weight, "
                                 f"got {name}=None")
            check_float_array(OP, name, w, shape=(embed, width))
    else:
        if in_proj_weight is None:
            raise ValueError(f"{OP}: in_proj_weight is needed unless use_separate_proj_weight")
        check_float_array(OP, "in_proj_weight", in_proj_weight, shape=(3 * embed, embed))
    if in_proj_bias is not None:
        check_float_array(OP, "in_proj_bias", in_proj_bias, shape=(3 * embed,))
    for name, b in (("bias_k", bias_k), ("bias_v", bias_v)):
        if b is not None:
            arr = check_float_array(OP, name, b)
            if arr.ndim > 3 or arr.size != embed or arr.shape[-1:] != (embed,):
                raise ValueError(f"{OP}: {name} must hold one {embed}-vector, shaped "
                                 f"(1, 1, {embed}) or ({embed},); got {arr.shape}")
    if (bias_k is None) != (bias_v is None):
        raise ValueError(f"{OP}: give both bias_k and bias_v or neither")
    check_float_array(OP, "out_proj_weight", out_proj_weight, shape=(embed, embed))
    if out_proj_bias is not None:
        check_float_array(OP, "out_proj_bias", out_proj_bias, shape=(embed,))


def _check_arguments(qa, embed_dim_to_check, num_heads, dropout_p, flags):
    """The scalar arguments: sizes, the dropout probability and the bool flags."""
    embed = qa.shape[-1]
    check_int(OP, "embed_dim_to_check", embed_dim_to_check, low=1)
    if embed != embed_dim_to_check:
        raise ValueError(f"{OP}: query's embedding dim {embed} != embed_dim_to_check "
                         f"{embed_dim_to_check}")
    check_int(OP, "num_heads", num_heads, low=1)
    if embed % num_heads:
        raise ValueError(f"{OP}: embed_dim {embed} is not divisible by num_heads {num_heads}")
    for name, value in flags.items():
        check_bool(OP, name, value)
    check_number(OP, "dropout_p", dropout_p, 0, 1)


def _mask_array(name, mask, dtype):
    """PyTorch's canonical mask: bool True (ignore) -> -inf, float kept (cast to dtype)."""
    if mask is None:
        return None
    arr = check_array(OP, name, mask)
    if arr.dtype == np.bool_:
        return as_variable(xp_of(arr).where(arr, -np.inf, 0.0).astype(dtype))
    if arr.dtype.kind != "f":
        raise TypeError(f"{OP}: {name} must be bool or floating point, got dtype {arr.dtype}")
    return mask if arr.dtype == dtype else as_variable(arr.astype(dtype))


def _check_shapes(sizes, key, value, attn_mask, key_padding_mask, statics, bias_k, is_causal):
    """Key/value against the query, the masks (returned additive, attn_mask as
    (1 or N * heads, L, S)) and the static keys/values; nothing is computed yet."""
    tgt_len, bsz, src_len, heads, head_dim, dtype = sizes
    k_shape, v_shape = data_of(key).shape, data_of(value).shape
    if k_shape[:2] != v_shape[:2] or k_shape[1] != bsz:
        raise ValueError(f"{OP}: key {k_shape} and value {v_shape} must be (S, N, *) with "
                         f"N = {bsz}")
    if is_causal and attn_mask is None:
        raise ValueError(f"{OP}: is_causal is a hint that attn_mask is causal; pass attn_mask")
    attn_mask = _mask_array("attn_mask", attn_mask, dtype)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if attn_mask.shape != (tgt_len, src_len):
                raise ValueError(f"{OP}: 2-D attn_mask must be {(tgt_len, src_len)}, got "
                                 f"{attn_mask.shape}")
            attn_mask = reshape(attn_mask, (1, tgt_len, src_len))
        elif attn_mask.shape != (bsz * heads, tgt_len, src_len):
            raise ValueError(f"{OP}: 3-D attn_mask must be {(bsz * heads, tgt_len, src_len)}, "
                             f"got {attn_mask.shape}")
    key_padding_mask = _mask_array("key_padding_mask", key_padding_mask, dtype)
    if key_padding_mask is not None and key_padding_mask.shape != (bsz, src_len):
        raise ValueError(f"{OP}: key_padding_mask must be {(bsz, src_len)}, got "
                         f"{key_padding_mask.shape}")
    for name, t in statics.items():
        if t is None:
            continue
        if bias_k is not None:
            raise ValueError(f"{OP}: bias_k/bias_v cannot be used with static_k/static_v")
        shape = check_float_array(OP, name, t).shape
        if len(shape) != 3:
            raise ValueError(f"{OP}: {name} must be (N * num_heads, S, head_dim), got shape "
                             f"{shape}")
        if shape[0] != bsz * heads or shape[2] != head_dim:
            raise ValueError(f"{OP}: {name} must be {(bsz * heads, '*', head_dim)}, got {shape}")
    return attn_mask, key_padding_mask


# ----- computing -----------------------------------------------------------------------------

def _split_heads(x, n_heads, head_dim):
    """(S, N, E) -> (N * heads, S, head_dim)."""
    s, n = x.shape[:2]
    return transpose(reshape(x, (s, n * n_heads, head_dim)), (1, 0, 2))


def _pad_last(x, xp, dtype):
    """Append one zero column to a mask (for bias_k / add_zero_attn)."""
    if x is None:
        return None
    shape = x.shape[:-1] + (1,)
    return concatenate([x, as_variable(xp.zeros(shape, dtype=dtype))], axis=-1)


def _project(query, key, value, embed, in_proj_weight, in_proj_bias, separate):
    """The input projections q, k, v (L or S, N, E)."""
    if separate is not None:
        ws = separate
    else:
        ws = [get_item(in_proj_weight, slice(i * embed, (i + 1) * embed)) for i in range(3)]
    bs = [None] * 3 if in_proj_bias is None else \
        [get_item(in_proj_bias, slice(i * embed, (i + 1) * embed)) for i in range(3)]
    return (linear(a, w, b) for a, w, b in zip((query, key, value), ws, bs))


def _keys(k, v, masks, sizes, bias_k, bias_v, statics, add_zero_attn):
    """Keys and values split into heads, with the bias_k/bias_v and zero columns appended
    (and the masks padded to match), the static ones used as given."""
    tgt_len, bsz, src_len, heads, head_dim, dtype = sizes
    xp = xp_of(data_of(k))
    embed = heads * head_dim
    if bias_k is not None:
        k = concatenate([k, broadcast_to(bias_k, (1, bsz, embed))], axis=0)
        v = concatenate([v, broadcast_to(bias_v, (1, bsz, embed))], axis=0)
        masks = [_pad_last(m, xp, dtype) for m in masks]
    k = _split_heads(k, heads, head_dim) if statics["static_k"] is None else statics["static_k"]
    v = _split_heads(v, heads, head_dim) if statics["static_v"] is None else statics["static_v"]
    if add_zero_attn:
        zeros = as_variable(xp.zeros((bsz * heads, 1, head_dim), dtype=dtype))
        k, v = concatenate([k, zeros], axis=1), concatenate([v, zeros], axis=1)
        masks = [_pad_last(m, xp, dtype) for m in masks]
    return k, v, masks


def _combined_mask(attn_mask, key_padding_mask, bsz, heads, src_len):
    """attn_mask plus the key padding mask broadcast over the heads."""
    if key_padding_mask is None:
        return attn_mask
    kpm = broadcast_to(reshape(key_padding_mask, (bsz, 1, 1, src_len)), (bsz, heads, 1, src_len))
    kpm = reshape(kpm, (bsz * heads, 1, src_len))
    return kpm if attn_mask is None else attn_mask + kpm


def _unbatched(query, key, value, key_padding_mask):
    """(L, E) inputs as (L, 1, E), the key padding mask as (1, S)."""
    query, key, value = (reshape(a, (a.shape[0], 1, a.shape[1])) for a in (query, key, value))
    if key_padding_mask is not None:
        key_padding_mask = reshape(key_padding_mask, (1, -1)) if isinstance(
            key_padding_mask, Variable) else data_of(key_padding_mask).reshape(1, -1)
    return query, key, value, key_padding_mask


def _attend(q, k, v, mask, sizes, dropout_p, need_weights, average):
    """The attention of every head, merged back to (L * N, E), and the weights."""
    tgt_len, bsz, src_len, heads, head_dim, dtype = sizes
    if need_weights or dropout_p == 1:      # scaled_dot_product_attention takes p < 1
        out, weights = plain_attention(q, k, v, mask, None, dropout_p, 1.0 / math.sqrt(head_dim))
    else:
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p), None
    if need_weights:
        weights = reshape(weights, (bsz, heads, tgt_len, data_of(k).shape[1]))
        if average:
            weights = _sum(weights, axis=1) * (1.0 / heads)
    else:
        weights = None
    return reshape(transpose(out, (1, 0, 2)), (tgt_len * bsz, heads * head_dim)), weights


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
    qa, ka, va = (check_float_array(OP, n, a) for n, a in (("query", query), ("key", key),
                                                           ("value", value)))
    if qa.ndim not in (2, 3) or ka.ndim != qa.ndim or va.ndim != qa.ndim:
        raise ValueError(f"{OP}: query, key and value must all be (L, N, E) or all unbatched "
                         f"(L, E); got shapes {qa.shape}, {ka.shape}, {va.shape}")
    separate = dict(q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight,
                    v_proj_weight=v_proj_weight)
    statics = dict(static_k=static_k, static_v=static_v)
    _check_arguments(qa, embed_dim_to_check, num_heads, dropout_p, dict(
        add_zero_attn=add_zero_attn, training=training, need_weights=need_weights,
        use_separate_proj_weight=use_separate_proj_weight,
        average_attn_weights=average_attn_weights, is_causal=is_causal))
    _check_weights(qa, ka, va, in_proj_weight, in_proj_bias, bias_k, bias_v, out_proj_weight,
                   out_proj_bias, use_separate_proj_weight, separate)
    batched = qa.ndim == 3
    if not batched:
        query, key, value, key_padding_mask = _unbatched(query, key, value, key_padding_mask)
    tgt_len, bsz, embed = data_of(query).shape
    sizes = (tgt_len, bsz, data_of(key).shape[0], num_heads, embed // num_heads, qa.dtype)
    masks = _check_shapes(sizes, key, value, attn_mask, key_padding_mask, statics, bias_k,
                          is_causal)

    q, k, v = _project(query, key, value, embed, in_proj_weight, in_proj_bias,
                       list(separate.values()) if use_separate_proj_weight else None)
    k, v, (attn_mask, key_padding_mask) = _keys(k, v, masks, sizes, bias_k, bias_v, statics,
                                                add_zero_attn)
    mask = _combined_mask(attn_mask, key_padding_mask, bsz, num_heads, data_of(k).shape[1])
    out, weights = _attend(_split_heads(q, num_heads, embed // num_heads), k, v, mask, sizes,
                           dropout_p if training else 0.0, need_weights, average_attn_weights)
    out = reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, embed))
    if not batched:
        out = reshape(out, (tgt_len, embed))
        weights = None if weights is None else reshape(weights, weights.shape[1:])
    return out, weights
