"""Rotary position embeddings (RoPE) in Hugging Face's convention.

A query or key vector's features are rotated in pairs by angles that grow with the
position, so q . k depends on the distance between two positions only.  HF (and so
LLaMA checkpoints converted to HF) pairs feature ``i`` with feature ``i + d/2``
(``rotate_half``), not adjacent features as Meta's original code does: the same
rotation on permuted projection rows.

* ``rope_inv_freq(head_dim, rope_parameters)``: the d/2 rotation frequencies
  (``rope_type`` "default", "linear" or "llama3", as HF's ``ROPE_INIT_FUNCTIONS``);
* ``rotary_cos_sin(position_ids, inv_freq, dtype)``: cos and sin, (B, 1, T, d);
* ``apply_rotary(x, cos, sin)``: x * cos + rotate_half(x) * sin.
"""
import math

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda
from lezero.utils.checks import check_number

__all__ = ["rope_inv_freq", "rotary_cos_sin", "rotary_cos_sin_from_ids", "rotate_half",
           "apply_rotary", "ROPE_TYPES"]

ROPE_TYPES = ("default", "linear", "llama3")


def _llama3(inv_freq, params, where):
    """Llama 3.1's frequency rescaling: long wavelengths slowed by ``factor``, short ones
    kept, the band between interpolated smoothly."""
    try:
        factor, low, high = params["factor"], params["low_freq_factor"], \
            params["high_freq_factor"]
        old_len = params["original_max_position_embeddings"]
    except KeyError as e:
        raise ValueError(f"{where}: rope_type 'llama3' needs rope_parameters[{e}]") from None
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def rope_inv_freq(head_dim, rope_parameters, where="rope_inv_freq"):
    """1 / theta ** (2i / d) for i < d/2, float32 as HF computes it, rescaled as
    ``rope_parameters["rope_type"]`` says."""
    if head_dim % 2:
        raise ValueError(f"{where}: rotary embeddings need an even head_dim, got {head_dim}")
    rope_type = rope_parameters.get("rope_type", rope_parameters.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise NotImplementedError(f"{where}: rope_type {rope_type!r} is not supported "
                                  f"(supported: {', '.join(ROPE_TYPES)})")
    theta = check_number(where, "rope_theta", rope_parameters.get("rope_theta", 10000.0),
                         low=0.0, low_open=True)
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    inv_freq = (np.float32(1.0) / np.float32(theta) ** exponent).astype(np.float32)
    if rope_type == "linear":
        factor = check_number(where, "rope_parameters['factor']",
                              rope_parameters.get("factor"), low=0.0, low_open=True)
        inv_freq = (inv_freq / np.float32(factor)).astype(np.float32)
    elif rope_type == "llama3":
        inv_freq = _llama3(inv_freq, rope_parameters, where)
    return inv_freq


def rotary_cos_sin(position_ids, inv_freq, dtype):
    """cos and sin of position x frequency, each (B, 1, T, d) in ``dtype`` (the angles are
    float32 products, as in HF, so long positions round the same way)."""
    xp = cuda.get_array_module(position_ids)
    freqs = xp.asarray(position_ids).astype(np.float32)[..., None] * xp.asarray(inv_freq)
    emb = xp.concatenate([freqs, freqs], axis=-1)[:, None]
    return xp.cos(emb).astype(dtype), xp.sin(emb).astype(dtype)


def rotary_cos_sin_from_ids(input_ids, inv_freq, dtype):
    """``rotary_cos_sin`` of the positions 0 .. T-1 of ``input_ids`` (B, T), computed with
    LeZero operators from the ids (a running count of ones), so that a traced or exported
    model follows the sequence length.  The angles are the same float32 products, so the
    values equal ``rotary_cos_sin``'s."""
    ids = input_ids if isinstance(input_ids, lz.Variable) else \
        lz.Variable(input_ids, requires_grad=False)
    ones = ids.to(dtype=np.float32) * 0.0 + 1.0                            # (B, T)
    positions = F.cumsum(ones, axis=1) - 1.0
    xp = cuda.get_array_module(ids.data)
    freqs = F.expand_dims(positions, -1) * xp.asarray(inv_freq)        # (B, T, d/2)
    emb = F.expand_dims(F.concatenate([freqs, freqs], axis=-1), 1)     # (B, 1, T, d)
    cos, sin = F.cos(emb), F.sin(emb)
    return (cos, sin) if cos.dtype == dtype else (cos.to(dtype=dtype), sin.to(dtype=dtype))


def rotate_half(x):
    """(x1, x2) -> (-x2, x1), the halves of the last axis."""
    x1, x2 = F.split(x, 2, axis=-1)
    return F.concatenate([-x2, x1], axis=-1)


def apply_rotary(x, cos, sin):
    """Rotate the (B, heads, T, d) queries or keys ``x`` by the positions' angles."""
    return x * cos + rotate_half(x) * sin
