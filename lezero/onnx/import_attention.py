"""ONNX ``Attention`` (opsets 23-25) run with LeZero.

Inputs are 4-D (batch, heads, sequence, head size) or 3-D (batch, sequence, hidden) with
``q_num_heads``/``kv_num_heads``.  Supported: a float or boolean ``attn_mask`` (padded
with "masked" up to the key length), ``is_causal`` (aligned to the bottom right when a
past cache or ``nonpad_kv_seqlen`` offsets the queries), sliding windows
(``left_window_size``/``right_window_size``), ``nonpad_kv_seqlen``, grouped-query
attention, ``scale``, ``softcap``, ``softmax_precision``, ``past_key``/``past_value``
(``present_*`` outputs) and every ``qk_matmul_output_mode``.  A row whose keys are all
masked gives zeros, as ONNX specifies.

The masks become one additive bias computed with NumPy (masks are not trained); the
products, softcap and softmax use ``lezero.functions``, so gradients reach Q, K and V.
"""
import numpy as np

import lezero.functions as F
from lezero.onnx.import_loss import _as_var
from lezero.onnx.import_ops import arr, op


_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _split_heads(x, heads, name):
    """(batch, seq, hidden) -> (batch, heads, seq, hidden / heads)."""
    b, s, hidden = x.shape
    if not heads or hidden % heads:
        raise ValueError(f"Attention: {name} hidden size {hidden} is not a multiple of "
                         f"its number of heads ({heads})")
    return F.transpose(F.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _mask_bias(mask, q_len, kv_len, dtype):
    """A float or boolean mask as an additive bias of width kv_len (-inf where masked)."""
    m = arr(mask)
    pad = kv_len - m.shape[-1]
    if pad < 0:
        raise ValueError(f"Attention: attn_mask has {m.shape[-1]} key positions, more "
                         f"than the {kv_len} keys")
    if m.dtype == np.bool_:
        m = np.where(m, 0.0, -np.inf)
    elif m.dtype.kind != "f":
        raise ValueError(f"Attention: attn_mask must be boolean or float, got {m.dtype}")
    m = m.astype(dtype)
    if pad:
        m = np.pad(m, [(0, 0)] * (m.ndim - 1) + [(0, pad)], constant_values=-np.inf)
    return m


def _position_bias(attrs, q_len, kv_len, offset, dtype):
    """The causal and sliding-window bias for queries at ``offset + i`` (offset: an int,
    or one per batch), shaped (q, kv) or (batch, 1, q, kv)."""
    offset = np.asarray(offset).reshape(-1, 1, 1, 1) if np.ndim(offset) else int(offset)
    diff = np.arange(q_len)[:, None] + offset - np.arange(kv_len)[None, :]
    allowed = np.ones(np.shape(diff), bool)
    if attrs.get("is_causal", 0):
        allowed &= diff >= 0
    left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
    if left < -1 or right < -1:
        raise ValueError(f"Attention: window sizes must be -1 or nonnegative, got "
                         f"left {left}, right {right}")
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


def _bias(node, args, q_len, kv_len, past_len, dtype):
    """The additive bias of every mask, causal rule, window and key padding."""
    mask = args[3] if len(args) > 3 else None
    nonpad = args[6] if len(args) > 6 else None
    bias = np.zeros((q_len, kv_len), dtype)
    if mask is not None:
        bias = bias + _mask_bias(mask, q_len, kv_len, dtype)
    offset = past_len
    if nonpad is not None:
        if past_len:
            raise ValueError("Attention: nonpad_kv_seqlen cannot be combined with a past "
                             "cache")
        lengths = arr(nonpad).reshape(-1).astype(np.int64)
        offset = lengths - q_len
        keep = np.arange(kv_len)[None, :] < lengths[:, None]
        bias = bias + np.where(keep, 0.0, -np.inf).astype(dtype).reshape(-1, 1, 1, kv_len)
    return bias + _position_bias(node.attrs, q_len, kv_len, offset, dtype)


def _heads(node, q, k, v):
    """Q, K, V as 4-D Variables, and whether the inputs were 3-D."""
    q, k, v = _as_var(q), _as_var(k), _as_var(v)
    if not (q.ndim == k.ndim == v.ndim) or q.ndim not in (3, 4):
        raise ValueError(f"Attention: Q, K and V must all be 3-D or all 4-D, got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    for name, x in (("Q", q), ("K", k), ("V", v)):
        if x.dtype not in _FLOATS:
            raise ValueError(f"Attention: {name} of dtype {x.dtype} is not supported "
                             "(float16, float32, float64)")
    if q.ndim == 4:
        return q, k, v, False
    qh, kvh = node.attrs.get("q_num_heads"), node.attrs.get("kv_num_heads")
    return (_split_heads(q, qh, "Q"), _split_heads(k, kvh, "K"), _split_heads(v, kvh, "V"),
            True)


def _with_past(x, past):
    return x if past is None else F.concatenate([_as_var(past), x], axis=2)


def _scores(node, q, k):
    """Q K^T scaled (each side by sqrt(scale), as ONNX does), softcapped if asked."""
    scale = node.attrs.get("scale")
    scale = 1.0 / np.sqrt(q.shape[3]) if scale is None else scale
    root = np.asarray(np.sqrt(scale), dtype=q.dtype)
    if q.shape[1] != k.shape[1]:
        if q.shape[1] % k.shape[1]:
            raise ValueError(f"Attention: {q.shape[1]} query heads are not a multiple of "
                             f"{k.shape[1]} key/value heads")
    reps = q.shape[1] // k.shape[1]
    k = F.repeat(k, reps, axis=1) if reps > 1 else k
    s = F.matmul(q * root, F.transpose(k * root, (0, 1, 3, 2)))
    cap = node.attrs.get("softcap")
    if cap is not None and cap > 0:
        c = np.asarray(cap, dtype=q.dtype)
        s = F.tanh(s / c) * c
    return s, reps


def _probabilities(node, scores, bias):
    """softmax(scores + bias) over the keys; rows with every key masked give zeros."""
    dead = np.isneginf(np.max(np.broadcast_to(bias, bias.shape), axis=-1, keepdims=True))
    safe = np.where(dead, np.zeros((), bias.dtype), bias)
    logits = scores + safe
    precision = node.attrs.get("softmax_precision")
    if precision is not None:
        from lezero.onnx._deps import onnx
        wide = np.dtype(onnx().helper.tensor_dtype_to_np_dtype(precision))
        if wide.kind != "f":
            raise ValueError(f"Attention: softmax_precision {precision} is not a float type")
        logits = logits.to(dtype=wide)
    p = F.softmax(logits, axis=-1)
    if dead.any():
        p = p * (~dead).astype(p.dtype)
    return p.to(dtype=scores.dtype)


@op("Attention")
def _attention(node, args, module):
    q, k, v, three_d = _heads(node, *args[:3])
    past_k, past_v = (args[k] if len(args) > k else None for k in (4, 5))
    if (past_k is None) != (past_v is None):
        raise ValueError("Attention: past_key and past_value must be given together")
    past_len = 0 if past_k is None else arr(past_k).shape[2]
    k, v = _with_past(k, past_k), _with_past(v, past_v)
    bias = _bias(node, args, q.shape[2], k.shape[2], past_len, q.dtype)
    scores, reps = _scores(node, q, k)
    p = _probabilities(node, scores, bias)
    y = F.matmul(p, F.repeat(v, reps, axis=1) if reps > 1 else v)
    if three_d:
        y = F.transpose(y, (0, 2, 1, 3))
        y = F.reshape(y, y.shape[:2] + (-1,))
    outs = [y, k, v]
    if len(node.outputs) > 3:
        mode = node.attrs.get("qk_matmul_output_mode", 0)
        if mode not in (0, 1, 2, 3):
            raise ValueError(f"Attention: qk_matmul_output_mode {mode} is not 0-3")
        outs.append({0: scores, 1: scores, 2: scores + bias, 3: p}[mode])
    return tuple(outs[:len(node.outputs)])
