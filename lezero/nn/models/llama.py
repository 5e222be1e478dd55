"""A LLaMA-style decoder with Hugging Face's ``LlamaForCausalLM`` layout and names.

    model = LlamaForCausalLM(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2,
                             intermediate_size=64)
    model.load_state_dict(hf_state_dict)          # HF's keys and shapes, as-is
    logits = model(input_ids, attention_mask)     # (batch, seq, vocab)

Pre-norm blocks with RMSNorm (``nn.RMSNorm``), rotary position embeddings in HF's
``rotate_half`` convention (``models.rotary``), a SwiGLU feed-forward network
(``down_proj(silu(gate_proj(x)) * up_proj(x))``) and grouped-query attention:
``num_key_value_heads`` key/value heads, each shared by ``num_attention_heads /
num_key_value_heads`` query heads (``F.scaled_dot_product_attention(enable_gqa=True)``).
No biases unless ``attention_bias`` / ``mlp_bias``; the head is untied unless
``tie_word_embeddings``.  Generation and the KV cache come from ``GenerationMixin``.
"""
from lezero import cuda, nn
import lezero.functions as F
from lezero.nn.models._hf import (activation, attention_bias, check_input_ids,
                                  init_hf_weights, resolve_config)
from lezero.nn.models.generation import GenerationMixin
from lezero.nn.models.registry import register_model
from lezero.nn.models.rotary import (apply_rotary, rope_inv_freq, rotary_cos_sin,
                                     rotary_cos_sin_from_ids)

__all__ = ["LlamaModel", "LlamaForCausalLM", "LLAMA_FIELDS"]

# LlamaConfig's fields that shape the network: name -> (HF's default, kind).
LLAMA_FIELDS = {
    "vocab_size": (32000, "int"), "hidden_size": (4096, "int"),
    "intermediate_size": (11008, "int"), "num_hidden_layers": (32, "int"),
    "num_attention_heads": (32, "int"), "num_key_value_heads": (None, "int?"),
    "head_dim": (None, "int?"), "hidden_act": ("silu", "act"),
    "max_position_embeddings": (2048, "int"), "initializer_range": (0.02, "float"),
    "rms_norm_eps": (1e-6, "eps"), "pad_token_id": (None, "id?"),
    "tie_word_embeddings": (False, "bool"), "rope_theta": (10000.0, "float"),
    "rope_parameters": (None, "any"), "rope_scaling": (None, "any"),
    "attention_bias": (False, "bool"), "attention_dropout": (0.0, "prob"),
    "mlp_bias": (False, "bool"),
}
# pretraining_tp only split the matmuls of Meta's tensor-parallel original.
LLAMA_IGNORED = {"pretraining_tp"}


def _rope_parameters(cfg):
    """HF's ``rope_parameters`` dict (or the older ``rope_scaling`` + ``rope_theta``)."""
    params = cfg.rope_parameters if cfg.rope_parameters is not None else cfg.rope_scaling
    if params is not None and not isinstance(params, dict):
        raise TypeError(f"LlamaForCausalLM: rope_parameters must be a dict, got "
                        f"{type(params).__name__}")
    params = dict(params or {})
    params.setdefault("rope_theta", cfg.rope_theta)
    return params


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary queries and keys."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads, self.num_kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        self.dropout = cfg.attention_dropout
        q_dim, kv_dim = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, q_dim, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, kv_dim, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, kv_dim, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(q_dim, cfg.hidden_size, bias=cfg.attention_bias)

    def _heads(self, t, B, T, heads):
        return t.reshape(B, T, heads, self.head_dim).transpose(0, 2, 1, 3)

    def forward(self, x, cos, sin, bias=None, cache=None):
        B, T, _ = x.shape
        q = apply_rotary(self._heads(self.q_proj(x), B, T, self.num_heads), cos, sin)
        k = apply_rotary(self._heads(self.k_proj(x), B, T, self.num_kv_heads), cos, sin)
        v = self._heads(self.v_proj(x), B, T, self.num_kv_heads)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, is_causal=bias is None and k.shape[-2] == T,
            scale=self.head_dim ** -0.5, enable_gqa=self.num_kv_heads != self.num_heads,
            dropout_p=self.dropout if self.training else 0.0)
        return self.o_proj(y.transpose(0, 2, 1, 3).reshape(B, T, -1))


class LlamaMLP(nn.Module):
    """SwiGLU: down_proj(act(gate_proj(x)) * up_proj(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)
        self.act_fn = activation(cfg.hidden_act)

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    """x + attn(rms(x)), then x + mlp(rms(x))."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.self_attn = LlamaAttention(cfg, layer_idx)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def forward(self, x, cos, sin, bias=None, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, bias, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    """The body: ``embed_tokens``, ``layers``, the final ``norm``."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size,
                                         padding_idx=cfg.pad_token_id)
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg, i)
                                     for i in range(cfg.num_hidden_layers)])
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        # The frequencies are derived from the config, not stored (HF's inv_freq buffer
        # is not persistent either, so the state_dicts agree).
        self.inv_freq = rope_inv_freq(cfg.head_dim, _rope_parameters(cfg), "LlamaForCausalLM")

    def forward(self, input_ids, attention_mask=None, position_ids=None,
                past_key_values=None):
        cfg = self.config
        past = 0 if past_key_values is None else past_key_values.get_seq_length()
        ids = check_input_ids("LlamaForCausalLM", input_ids, cfg.vocab_size)
        xp = cuda.get_array_module(ids)
        B, T = ids.shape
        x = self.embed_tokens(ids)
        if position_ids is None and not past:     # from the ids: exports follow T
            cos, sin = rotary_cos_sin_from_ids(input_ids, self.inv_freq, x.dtype)
        else:
            if position_ids is None:
                position_ids = xp.arange(past, past + T)[None]
            cos, sin = rotary_cos_sin(position_ids, self.inv_freq, x.dtype)
        bias = None
        if attention_mask is not None or (past and T > 1):
            bias = attention_bias("LlamaForCausalLM", attention_mask, B, T, past + T,
                                  x.dtype, xp, causal=True)
        for layer in self.layers:
            x = layer(x, cos, sin, bias, past_key_values)
        return self.norm(x)


@register_model("llama")
class LlamaForCausalLM(nn.Module, GenerationMixin):
    """HF's ``LlamaForCausalLM``: ``model`` (LlamaModel) and ``lm_head`` (no bias).

    Keyword arguments are ``LlamaConfig``'s fields with its defaults (``vocab_size=32000,
    hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=None`` (= heads, plain multi-head),
    ``head_dim=None`` (= hidden_size / heads), ``hidden_act="silu",
    max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=10000.0,
    rope_parameters=None, attention_bias=False, attention_dropout=0.0, mlp_bias=False,
    tie_word_embeddings=False, pad_token_id=None``).  ``forward(input_ids,
    attention_mask=None, position_ids=None, past_key_values=None)`` returns the logits
    (B, T, vocab_size).
    """

    def __init__(self, **config):
        super().__init__()
        cfg = resolve_config("LlamaForCausalLM", LLAMA_FIELDS, config, ignored=LLAMA_IGNORED)
        if cfg.num_key_value_heads is None:
            cfg.num_key_value_heads = cfg.num_attention_heads
        if cfg.head_dim is None:
            if cfg.hidden_size % cfg.num_attention_heads:
                raise ValueError(f"LlamaForCausalLM: hidden_size ({cfg.hidden_size}) must be "
                                 f"divisible by num_attention_heads "
                                 f"({cfg.num_attention_heads}), or give head_dim")
            cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
        if cfg.num_attention_heads % cfg.num_key_value_heads:
            raise ValueError(f"LlamaForCausalLM: num_attention_heads "
                             f"({cfg.num_attention_heads}) must be a multiple of "
                             f"num_key_value_heads ({cfg.num_key_value_heads})")
        self.config = cfg
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        init_hf_weights(self, cfg.initializer_range)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None,
                past_key_values=None):
        return self.lm_head(self.model(input_ids, attention_mask, position_ids,
                                       past_key_values))
