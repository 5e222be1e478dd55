"""ONNX sequence-state operators run with LeZero: LinearAttention, CausalConvWithState and
TensorScatter (opset 24-27; registered into ``import_ops.IMPORT_OPS``).

These are the recurrent building blocks of linear-attention models (Gated DeltaNet, Mamba):
a recurrent state carried from one call to the next, and a key/value cache written in
place.  They are built from ``lezero.functions`` so gradients reach every float input;
index bookkeeping (which cache slot each update lands in) is computed with NumPy.
"""
import numpy as np

import lezero.functions as F
from lezero.onnx.import_loss import _as_var
from lezero.onnx.import_ops import arr, as_dtype, ints, op

_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_RULES = ("linear", "gated", "delta", "gated_delta")


def _optional(args, k):
    return args[k] if len(args) > k else None


def _check_float(op_name, name, x):
    if arr(x).dtype not in _FLOATS:
        raise ValueError(f"{op_name}: {name} of dtype {arr(x).dtype} is not supported "
                         "(float16, float32, float64)")


# ----- LinearAttention -----------------------------------------------------------------

def _work_dtype(x):
    """float32, as ONNX specifies the accumulation; float64 inputs stay float64."""
    return np.float64 if arr(x).dtype == np.float64 else np.float32


def _heads(x, heads, name, work):
    """(B, T, H*D) -> (B, H, T, D) in the working dtype."""
    b, t, hd = arr(x).shape
    if hd % heads:
        raise ValueError(f"LinearAttention: {name} last dim {hd} is not a multiple of "
                         f"its number of heads ({heads})")
    x = F.reshape(as_dtype(_as_var(x), work), (b, t, heads, hd // heads))
    return F.transpose(x, (0, 2, 1, 3))


def _la_settings(node, args):
    """Checked attributes: (rule, q heads, kv heads)."""
    rule = node.attrs.get("update_rule", "gated_delta")
    if rule not in _RULES:
        raise ValueError(f"LinearAttention: update_rule {rule!r} is not one of "
                         f"{', '.join(_RULES)}")
    hq, hkv = node.attrs.get("q_num_heads", 0), node.attrs.get("kv_num_heads", 0)
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise ValueError(f"LinearAttention: q_num_heads ({hq}) must be a positive multiple "
                         f"of kv_num_heads ({hkv})")
    for name, k, needed in (("decay", 4, "gated" in rule), ("beta", 5, "delta" in rule)):
        if (_optional(args, k) is None) == needed:
            raise ValueError(f"LinearAttention: update_rule {rule!r} "
                             f"{'requires' if needed else 'forbids'} the {name} input")
    for name, x in zip(("query", "key", "value"), args[:3]):
        _check_float("LinearAttention", name, x)
        if arr(x).ndim != 3:
            raise ValueError(f"LinearAttention: {name} must be rank 3 (B, T, H*D), got "
                             f"shape {arr(x).shape}")
    return rule, hq, hkv


def _gate(x, hkv, name, widths, work):
    """decay or beta (B, T, W) -> (B, H_kv or 1, T, D or 1), W in ``widths``."""
    b, t, w = arr(x).shape if arr(x).ndim == 3 else (0, 0, -1)
    if w not in widths:
        raise ValueError(f"LinearAttention: {name} must be (B, T, W) with W in "
                         f"{sorted(set(widths))}, got shape {arr(x).shape}")
    heads = hkv if w != 1 else 1
    x = F.reshape(as_dtype(_as_var(x), work), (b, t, heads, w // heads))
    return F.transpose(x, (0, 2, 1, 3))


def _initial_state(past, shape, work):
    if past is None:
        return _as_var(np.zeros(shape, work))
    if arr(past).shape != shape:
        raise ValueError(f"LinearAttention: past_state has shape {arr(past).shape}, "
                         f"expected {shape}")
    _check_float("LinearAttention", "past_state", past)
    return as_dtype(_as_var(past), work)


def _step(state, k_t, v_t, g_t, beta_t):
    """One token of the recurrence: decay, delta correction, then write k ⊗ v."""
    if g_t is not None:
        state = state * F.expand_dims(F.exp(g_t), -1)
    if beta_t is not None:
        retrieved = F.matmul(F.expand_dims(k_t, 2), state)[:, :, 0, :]
        v_t = beta_t * (v_t - retrieved)
    return state + F.expand_dims(k_t, -1) * F.expand_dims(v_t, 2)


@op("LinearAttention")
def _linear_attention(node, args, module):
    """Runs the recurrence token by token in float32 (ONNX's semantics; float64 inputs
    in float64); outputs
    (B, T, H_q * d_v) in the query's dtype and the final state (B, H_kv, d_k, d_v) in
    the past state's dtype (the query's when there is none)."""
    rule, hq, hkv = _la_settings(node, args)
    query, key, value = args[:3]
    work = _work_dtype(query)
    q, k, v = (_heads(x, n, name, work) for x, n, name in
               ((query, hq, "query"), (key, hkv, "key"), (value, hkv, "value")))
    b, _, t, dk = q.shape
    dv = v.shape[-1]
    if k.shape[-1] != dk or k.shape[:3] != (b, hkv, t) or v.shape[:3] != (b, hkv, t):
        raise ValueError(f"LinearAttention: query {arr(query).shape}, key {arr(key).shape} "
                         f"and value {arr(value).shape} do not agree on batch, length and "
                         "head size")
    decay, beta, past = _optional(args, 4), _optional(args, 5), _optional(args, 3)
    g = None if decay is None else _gate(decay, hkv, "decay", (hkv, hkv * dk), work)
    bt = None if beta is None else _gate(beta, hkv, "beta", (hkv, 1), work)
    state = _initial_state(past, (b, hkv, dk, dv), work)
    scale = node.attrs.get("scale", 0.0) or 1.0 / np.sqrt(dk)
    spread = np.repeat(np.arange(hkv), hq // hkv)
    outputs = []
    for i in range(t):
        state = _step(state, k[:, :, i, :], v[:, :, i, :],
                      None if g is None else g[:, :, i, :],
                      None if bt is None else bt[:, :, i, :])
        read = state if hq == hkv else F.take(state, spread, axis=1)
        o = F.matmul(F.expand_dims(q[:, :, i, :], 2), read)[:, :, 0, :]
        outputs.append(o * work(scale))
    out = F.reshape(F.transpose(F.stack(outputs, axis=2), (0, 2, 1, 3)), (b, t, hq * dv))
    state_dtype = arr(query if past is None else past).dtype
    return as_dtype(out, arr(query).dtype), as_dtype(state, state_dtype)


# ----- CausalConvWithState -------------------------------------------------------------

def _causal_inputs(args):
    x, w = _as_var(args[0]), _as_var(args[1])
    for name, t in (("input", x), ("weight", w)):
        _check_float("CausalConvWithState", name, t)
        if t.ndim != 3:
            raise ValueError(f"CausalConvWithState: {name} must be rank 3, got shape "
                             f"{t.shape}")
    b, c, _ = x.shape
    if w.shape[:2] != (c, 1) or w.shape[2] < 1:
        raise ValueError(f"CausalConvWithState: weight must be ({c}, 1, k) for {c} "
                         f"channels, got shape {w.shape}")
    return x, w, b, c, w.shape[2]


@op("CausalConvWithState")
def _causal_conv(node, args, module):
    """Depthwise causal 1-D convolution: the input is prefixed with ``past_state`` (zeros
    when absent), each channel convolved with its own k taps; ``present_state`` is the
    last k - 1 positions.  The sum runs in float32 (float64 for float64 input) and is
    rounded to the input's dtype before the optional SiLU, as ONNX's reference does."""
    activation = node.attrs.get("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise ValueError(f"CausalConvWithState: activation {activation!r} is not one of "
                         "none, silu, swish")
    x, w, b, c, k = _causal_inputs(args)
    bias, past = _optional(args, 2), _optional(args, 3)
    if past is None:
        past = np.zeros((b, c, k - 1), x.dtype)
    elif arr(past).shape != (b, c, k - 1):
        raise ValueError(f"CausalConvWithState: past_state has shape {arr(past).shape}, "
                         f"expected {(b, c, k - 1)}")
    padded = F.concatenate([as_dtype(_as_var(past), x.dtype), x], axis=2)
    length = x.shape[2]
    work = _work_dtype(x)
    wide, taps = as_dtype(padded, work), as_dtype(w, work)
    out = sum(F.reshape(taps[:, 0, j], (1, c, 1)) * wide[:, :, j:j + length]
              for j in range(k))
    if bias is not None:
        out = out + F.reshape(as_dtype(_as_var(bias), work), (1, c, 1))
    out = as_dtype(out, x.dtype)
    if activation != "none":
        out = as_dtype(F.silu(as_dtype(out, work)), x.dtype)
    return out, padded[:, :, length:]


# ----- TensorScatter -------------------------------------------------------------------

def _cache_sources(node, cache_shape, update_shape, write_indices):
    """For every batch row and cache slot along ``axis``: the update position written
    there (or -1), with the axis normalised."""
    axis = node.attrs.get("axis", -2)
    mode = node.attrs.get("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter: mode {mode!r} is not linear or circular")
    ndim = len(cache_shape)
    if not -ndim <= axis < ndim or axis % ndim == 0:
        raise ValueError(f"TensorScatter: axis {axis} must name a dim after the batch "
                         f"dim of a rank-{ndim} cache")
    axis %= ndim
    if len(update_shape) != ndim or any(
            u != p for d, (u, p) in enumerate(zip(update_shape, cache_shape)) if d != axis) \
            or update_shape[axis] > cache_shape[axis]:
        raise ValueError(f"TensorScatter: update of shape {tuple(update_shape)} does not "
                         f"fit the cache of shape {tuple(cache_shape)} along axis {axis}")
    batch, slots, length = cache_shape[0], cache_shape[axis], update_shape[axis]
    starts = np.zeros(batch, np.int64) if write_indices is None else np.asarray(
        ints(write_indices), np.int64)
    if starts.shape != (batch,):
        raise ValueError(f"TensorScatter: write_indices must hold {batch} values, got "
                         f"{starts.size}")
    source = np.full((batch, slots), -1, np.int64)
    for row, start in enumerate(starts.tolist()):
        pos = start + np.arange(length)
        if mode == "circular":
            pos %= slots
        elif start < 0 or start + length > slots:
            raise IndexError(f"TensorScatter: writing {length} positions from index "
                             f"{start} overruns the {slots} cache slots")
        for s, p in enumerate(pos.tolist()):
            source[row, p] = s
    return source, axis


@op("TensorScatter")
def _tensor_scatter(node, args, module):
    """Writes ``update`` into a copy of ``past_cache`` along ``axis``, batch row b
    starting at ``write_indices[b]`` (wrapping around in ``circular`` mode)."""
    cache, update = _as_var(args[0]), _as_var(args[1])
    if cache.dtype != update.dtype:
        raise ValueError(f"TensorScatter: past_cache is {cache.dtype} but update is "
                         f"{update.dtype}")
    source, axis = _cache_sources(node, cache.shape, update.shape, _optional(args, 2))
    batch, slots = source.shape
    moved_cache = F.moveaxis(cache, axis, 1)              # (B, slots, rest...)
    moved_update = F.moveaxis(update, axis, 1)            # (B, length, rest...)
    rest, length = moved_cache.shape[2:], moved_update.shape[1]
    flat = F.reshape(moved_update, (batch * length,) + rest)
    picks = (np.arange(batch)[:, None] * length + np.maximum(source, 0)).reshape(-1)
    taken = F.reshape(F.take(flat, picks, axis=0), (batch, slots) + rest)
    written = (source >= 0).reshape((batch, slots) + (1,) * len(rest))
    return F.moveaxis(F.where(written, taken, moved_cache), 1, axis)
