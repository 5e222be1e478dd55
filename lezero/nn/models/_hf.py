"""What the Hugging Face ports (BERT, GPT-2, LLaMA) share: config fields, activations,
attention masks, initialisation.

A model takes its ``transformers`` config's field names as keyword arguments, with the
config's defaults.  ``resolve_config`` checks them against a table of fields (kind and
default); the fields every ``transformers`` config carries but which do not change the
computation (``architectures``, ``id2label``, ``bos_token_id``, ...) are accepted and
ignored, so ``get_model("bert", **hf_config.to_dict())`` works.  A misspelt field is a
TypeError naming it.
"""
import math
from types import SimpleNamespace

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.utils.checks import (check_bool, check_choice, check_int, check_number,
                                 describe)

__all__ = ["resolve_config", "require_false", "ACTIVATIONS", "activation", "attention_bias",
           "check_input_ids", "init_hf_weights", "min_value"]

# Fields of every transformers config (PreTrainedConfig and generation settings) that
# describe the checkpoint, its tokenizer or HF's own machinery, not the network.
COMMON_IGNORED = frozenset({
    "transformers_version", "architectures", "output_hidden_states", "output_attentions",
    "return_dict", "dtype", "torch_dtype", "chunk_size_feed_forward", "is_encoder_decoder",
    "id2label", "label2id", "num_labels", "problem_type", "_name_or_path", "name_or_path",
    "model_type", "use_cache", "bos_token_id", "eos_token_id", "sep_token_id",
    "decoder_start_token_id", "tokenizer_class", "prefix", "task_specific_params",
    "finetuning_task", "_attn_implementation", "attn_implementation", "pruned_heads",
    "torchscript", "tie_encoder_decoder", "cross_attention_hidden_size", "_commit_hash",
    "_experts_implementation", "gradient_checkpointing"})

# HF's ACT2FN names -> LeZero functions ("gelu" is erf-exact; the "new"/"fast"/"tanh"
# variants are the tanh approximation, the same function in every spelling).
ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "quick_gelu": lambda x: x * F.sigmoid(1.702 * x),
    "relu": F.relu, "silu": F.silu, "swish": F.silu, "tanh": F.tanh, "sigmoid": F.sigmoid,
    "mish": F.mish,
}


def _check_field(model, name, kind, value):
    """One field's value checked for its kind: "int" (positive), "int0" (>= 0), "int?"
    (positive or None), "id?" (>= 0 or None), "eps" (> 0), "prob" ([0, 1)), "float"
    (> 0), "bool", "act" (an ACTIVATIONS name), "any"."""
    where = f"{model}"
    if kind in ("int", "int?"):
        return check_int(where, name, value, low=1, allow_none=kind == "int?")
    if kind in ("int0", "id?"):
        return check_int(where, name, value, low=0, allow_none=kind == "id?")
    if kind in ("eps", "float"):
        return check_number(where, name, value, low=0.0, low_open=True)
    if kind == "prob":
        return check_number(where, name, value, low=0.0, high=1.0, high_open=True)
    if kind == "bool":
        return check_bool(where, name, value)
    if kind == "act":
        return check_choice(where, name, value, tuple(ACTIVATIONS))
    return value


def require_false(model, cfg, *names):
    """Refuse HF features this port does not build (a decoder BERT, cross-attention)."""
    for name in names:
        if getattr(cfg, name):
            raise NotImplementedError(f"{model}: {name}=True is not supported (only the "
                                      f"architecture of the pretrained checkpoints is built)")


def resolve_config(model, fields, kwargs, aliases=None, ignored=()):
    """The checked config of ``model`` as a namespace (``config=`` a HF config or dict
    may stand for the fields).

    ``fields``: name -> (default, kind) (kinds in ``_check_field``); ``aliases``: HF's
    ``attribute_map`` (``hidden_size`` -> ``n_embd`` for GPT-2); ``ignored``: fields of
    this model's HF config that do not change its computation here."""
    aliases = aliases or {}
    kwargs = _expand_config(model, kwargs)
    values = {name: default for name, (default, _) in fields.items()}
    unknown = []
    for key, value in kwargs.items():
        name = aliases.get(key, key)
        if name in fields:
            values[name] = value
        elif name not in COMMON_IGNORED and name not in ignored:
            unknown.append(key)
    if unknown:
        raise TypeError(f"{model}: unknown config field(s) {sorted(unknown)}; this model "
                        f"takes {sorted(fields)}")
    for name, (_, kind) in fields.items():
        values[name] = _check_field(model, name, kind, values[name])
    return SimpleNamespace(**values)


def _expand_config(model, kwargs):
    """``config=`` (a transformers config, anything with ``to_dict()``, or a dict) spread
    into the keyword arguments; fields given explicitly win."""
    if "config" not in kwargs:
        return kwargs
    kwargs = dict(kwargs)
    config = kwargs.pop("config")
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, dict):
        raise TypeError(f"{model}: config must be a transformers config or a dict, got "
                        f"{describe(config)}")
    return {**config, **kwargs}


def activation(name):
    """The function HF's ``ACT2FN[name]`` computes."""
    return ACTIVATIONS[name]


def min_value(dtype):
    """The most negative finite value of ``dtype``: HF's eager masks add it (not -inf), so
    a row with every key masked attends uniformly instead of giving NaN."""
    return float(np.finfo(dtype).min)


def check_input_ids(model, input_ids, vocab_size, max_positions=None, past=0):
    """``input_ids`` as an int array (B, T) of ids in [0, vocab_size); a clear error
    otherwise (a float array, a 1-D sequence, an id past the vocabulary)."""
    ids = input_ids.data if isinstance(input_ids, lz.Variable) else input_ids
    if not isinstance(ids, cuda.array_types()):
        raise TypeError(f"{model}: input_ids must be an int array (batch, seq), got "
                        f"{describe(input_ids)}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{model}: input_ids must have an integer dtype, got {ids.dtype}")
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError(f"{model}: input_ids must have shape (batch, seq) with seq >= 1, "
                         f"got {ids.shape}")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"{model}: input_ids must lie in [0, {vocab_size}) (vocab_size), "
                         f"got ids from {int(ids.min())} to {int(ids.max())}")
    if max_positions is not None and past + ids.shape[1] > max_positions:
        raise ValueError(f"{model}: {past + ids.shape[1]} positions exceed "
                         f"max_position_embeddings {max_positions}")
    return ids


def attention_bias(model, attention_mask, batch, q_len, kv_len, dtype, xp, causal):
    """The additive attention mask HF's eager attention uses, (B or 1, 1, q_len, kv_len):
    0 where a query may attend to a key, ``min_value(dtype)`` where not.

    ``attention_mask`` (B, kv_len) holds 1 for real tokens and 0 for padding (None: no
    padding); ``causal`` lets query i (the last q_len of kv_len positions) see keys
    <= its position.  Returns None when nothing is masked and not causal.  The padding
    part is computed from the mask with LeZero operators (HF's ``(1 - mask) * min``), so
    a traced or exported model keeps the mask as an input instead of this call's values."""
    bias = None
    if attention_mask is not None:
        bias = _padding_bias(model, attention_mask, batch, kv_len, dtype, xp)
    if not causal:
        return bias
    if bias is None:
        rows = xp.arange(q_len)[:, None] + (kv_len - q_len)
        tri = (xp.arange(kv_len)[None, :] <= rows)[None, None]
        return xp.where(tri, 0.0, min_value(dtype)).astype(dtype)
    return F.minimum(bias, _causal_bias_like(bias, q_len, kv_len))


def _causal_bias_like(bias, q_len, kv_len):
    """The causal part (1, 1, q_len, kv_len) as ``(1 - tril(ones)) * min``, the ones made
    from the padding bias (B, 1, 1, kv_len) by LeZero operators: a traced or exported
    model then follows the run-time length instead of holding this call's triangle."""
    ones = bias[:1, 0, 0] * 0.0 + 1.0                           # (1, kv_len)
    tri = F.tril(ones.reshape(-1, 1) * ones, k=kv_len - q_len)  # (kv_len, kv_len)
    if q_len != kv_len:
        tri = tri[kv_len - q_len:]                              # the last q_len queries
    return ((1.0 - tri) * min_value(bias.dtype))[None, None]


def _padding_bias(model, attention_mask, batch, kv_len, dtype, xp):
    """(1 - mask) * min_value(dtype) as a (B, 1, 1, kv_len) Variable."""
    mask = attention_mask
    if not isinstance(mask, lz.Variable):
        mask = lz.Variable(xp.asarray(mask if isinstance(mask, cuda.array_types())
                                      else np.asarray(mask)), requires_grad=False)
    if mask.shape != (batch, kv_len):
        raise ValueError(f"{model}: attention_mask must have shape (batch, seq) = "
                         f"{(batch, kv_len)}, got {tuple(mask.shape)}")
    if mask.dtype.kind not in "biuf":
        raise TypeError(f"{model}: attention_mask must hold numbers or booleans, got dtype "
                        f"{mask.dtype}")
    keep = mask.to(dtype=dtype)
    return ((1.0 - keep) * min_value(dtype)).reshape(batch, 1, 1, kv_len)


def init_hf_weights(module, std, scaled=(), num_layers=1):
    """HF's ``_init_weights``: Linear / Conv1D and Embedding weights N(0, std), zero biases
    and padding rows, norms at weight 1 / bias 0; parameters whose name ends in one of
    ``scaled`` get std / sqrt(2 num_layers) (GPT-2's residual projections)."""
    for m in module.modules():
        weight = getattr(m, "weight", None)
        if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
            continue                                 # already 1 and 0
        if isinstance(weight, lz.Parameter) and weight.ndim == 2:
            nn.init.normal_(weight, 0.0, std)
        bias = m._parameters.get("bias")
        if bias is not None:
            nn.init.zeros_(bias)
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight.data[m.padding_idx] = 0
    for name, p in module.named_parameters():
        if any(name.endswith(s) for s in scaled):
            nn.init.normal_(p, 0.0, std / math.sqrt(2 * num_layers))
