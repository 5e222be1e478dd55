"""GPT-2 with Hugging Face's ``GPT2LMHeadModel`` layout, names and numerics.

    model = GPT2LMHeadModel(vocab_size=99, n_embd=32, n_layer=2, n_head=4)
    model.load_state_dict(hf_state_dict)          # HF's keys and shapes, as-is
    logits = model(input_ids, attention_mask)     # (batch, seq, vocab)
    ids = model.generate(prompt, 20, do_sample=True, top_p=0.9)

HF's GPT-2 keeps OpenAI's ``Conv1D`` layers: a linear map whose weight is stored
(in_features, out_features), the transpose of ``nn.Linear``'s.  ``Conv1D`` here keeps that
layout, so a HF state_dict loads with no transposing.  The output head ``lm_head`` shares
its weight with the token embedding ``transformer.wte`` (``tie_word_embeddings``, HF's
default); both keys are in the state_dict, as in HF's.  GPT-mini (``models.GPT``) is the
nanoGPT layout with ``nn.Linear``; this is the checkpoint-compatible one.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.functions.common import in_autocast
from lezero.nn.models._hf import (activation, attention_bias, check_input_ids,
                                  init_hf_weights, require_false, resolve_config)
from lezero.nn.models.generation import GenerationMixin
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int

__all__ = ["Conv1D", "GPT2Model", "GPT2LMHeadModel", "GPT2_FIELDS"]

# GPT2Config's fields that shape the network: name -> (HF's default, kind).
GPT2_FIELDS = {
    "vocab_size": (50257, "int"), "n_positions": (1024, "int"), "n_embd": (768, "int"),
    "n_layer": (12, "int"), "n_head": (12, "int"), "n_inner": (None, "int?"),
    "activation_function": ("gelu_new", "act"), "resid_pdrop": (0.1, "prob"),
    "embd_pdrop": (0.1, "prob"), "attn_pdrop": (0.1, "prob"),
    "layer_norm_epsilon": (1e-5, "eps"), "initializer_range": (0.02, "float"),
    "scale_attn_weights": (True, "bool"), "scale_attn_by_inverse_layer_idx": (False, "bool"),
    "reorder_and_upcast_attn": (False, "bool"), "tie_word_embeddings": (True, "bool"),
    "add_cross_attention": (False, "bool"),
}
# GPT2Config.attribute_map: the generic names HF also accepts.
GPT2_ALIASES = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions",
                "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"}
# Fields of GPT2Config for the sequence-summary (classification) heads, not this model.
GPT2_IGNORED = {"summary_type", "summary_use_proj", "summary_activation",
                "summary_proj_to_labels", "summary_first_dropout", "pad_token_id",
                "n_ctx"}   # n_ctx: older configs' copy of n_positions


class Conv1D(nn.Module):
    """OpenAI's / HF's ``Conv1D(nf, nx)``: y = x @ weight + bias with ``weight`` (nx, nf)
    -- a linear layer stored transposed (in_features first)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf, self.nx = nf, nx
        self.weight = nn.Parameter(np.zeros((nx, nf), dtype=np.float32))
        self.bias = nn.Parameter(np.zeros(nf, dtype=np.float32))
        nn.init.normal_(self.weight, 0.0, 0.02)

    def forward(self, x):
        if x.shape[-1] != self.nx:
            raise ValueError(f"Conv1D: expected input with {self.nx} features in the last "
                             f"dim, got shape {x.shape}")
        if in_autocast():
            # Under autocast the product reads the parameter itself, so autocast's cached
            # float16 copy serves it (HF's torch.addmm: the bias joins the product in its
            # dtype).
            y = F.matmul(x, self.weight)
            return y + (self.bias if y.dtype == self.bias.dtype
                        else self.bias.to(dtype=y.dtype))
        # One GEMM over the merged batch axes with the bias added in place, as HF's addmm
        # (NumPy's 3-D matmul runs one product per batch row, each reading the weight).
        return F.linear(x, self.weight.T, self.bias)

    def extra_repr(self):
        return f"nf={self.nf}, nx={self.nx}"


class GPT2Attention(nn.Module):
    """Causal self-attention: ``c_attn`` makes q, k, v in one map, ``c_proj`` projects."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.embed_dim, self.num_heads = cfg.n_embd, cfg.n_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.layer_idx = layer_idx
        self.scaling = self.head_dim ** -0.5 if cfg.scale_attn_weights else 1.0
        if cfg.scale_attn_by_inverse_layer_idx:
            self.scaling /= float(layer_idx + 1)
        self.c_attn = Conv1D(3 * cfg.n_embd, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd)
        self.attn_dropout_p = cfg.attn_pdrop
        self.resid_dropout = nn.Dropout(cfg.resid_pdrop)

    def forward(self, x, bias=None, cache=None):
        B, T, C = x.shape
        q, k, v = (t.reshape(B, T, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)
                   for t in F.split(self.c_attn(x), 3, axis=-1))
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)
        causal = bias is None and k.shape[-2] == T          # the fast causal path
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, is_causal=causal, scale=self.scaling,
            dropout_p=self.attn_dropout_p if self.training else 0.0)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class GPT2MLP(nn.Module):
    """c_fc -> activation -> c_proj -> dropout."""

    def __init__(self, inner, cfg):
        super().__init__()
        self.c_fc = Conv1D(inner, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, inner)
        self.act = activation(cfg.activation_function)
        self.dropout = nn.Dropout(cfg.resid_pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    """Pre-norm block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        inner = cfg.n_inner if cfg.n_inner is not None else 4 * cfg.n_embd
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = GPT2Attention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner, cfg)

    def forward(self, x, bias=None, cache=None):
        x = x + self.attn(self.ln_1(x), bias, cache)
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    """The GPT-2 body: token + position embeddings, ``n_layer`` blocks, ``ln_f``."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(cfg, i) for i in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask=None, position_ids=None, token_type_ids=None,
                past_key_values=None):
        cfg = self.config
        past = 0 if past_key_values is None else past_key_values.get_seq_length()
        ids = check_input_ids("GPT2LMHeadModel", input_ids, cfg.vocab_size, cfg.n_positions,
                              past)
        xp = cuda.get_array_module(ids)
        B, T = ids.shape
        if position_ids is None:
            position_ids = xp.arange(past, past + T)[None]
        x = self.wte(ids) + self.wpe(position_ids)
        if token_type_ids is not None:
            x = x + self.wte(token_type_ids)
        x = self.drop(x)
        bias = None
        if attention_mask is not None or (past and T > 1):
            bias = attention_bias("GPT2LMHeadModel", attention_mask, B, T, past + T,
                                  x.dtype, xp, causal=True)
        for block in self.h:
            x = block(x, bias, past_key_values)
        return self.ln_f(x)


@register_model("gpt2")
class GPT2LMHeadModel(nn.Module, GenerationMixin):
    """HF's ``GPT2LMHeadModel``: ``transformer`` (GPT2Model) and ``lm_head`` (no bias).

    Keyword arguments are ``GPT2Config``'s fields with its defaults (``vocab_size=50257,
    n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
    activation_function="gelu_new", resid_pdrop=embd_pdrop=attn_pdrop=0.1,
    layer_norm_epsilon=1e-5, initializer_range=0.02, scale_attn_weights=True,
    scale_attn_by_inverse_layer_idx=False, tie_word_embeddings=True``; ``hidden_size``,
    ``num_hidden_layers``, ``num_attention_heads``, ``max_position_embeddings`` are
    accepted as HF's aliases).  ``forward(input_ids, attention_mask=None,
    position_ids=None, token_type_ids=None, past_key_values=None, logits_to_keep=0)``
    returns the logits (B, T, vocab_size), or of the last ``logits_to_keep`` positions
    only (as HF's; ``generate`` asks for one); a ``KVCache`` passed as ``past_key_values``
    is extended in place.
    """

    def __init__(self, **config):
        super().__init__()
        cfg = resolve_config("GPT2LMHeadModel", GPT2_FIELDS, config, GPT2_ALIASES,
                             GPT2_IGNORED)
        require_false("GPT2LMHeadModel", cfg, "add_cross_attention")
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"GPT2LMHeadModel: n_embd ({cfg.n_embd}) must be divisible by "
                             f"n_head ({cfg.n_head})")
        self.config = cfg
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        init_hf_weights(self, cfg.initializer_range, scaled=("c_proj.weight",),
                        num_layers=cfg.n_layer)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None, token_type_ids=None,
                past_key_values=None, logits_to_keep=0):
        hidden = self.transformer(input_ids, attention_mask, position_ids, token_type_ids,
                                  past_key_values)
        if logits_to_keep:              # HF's: only the last positions (generate needs one)
            check_int("GPT2LMHeadModel", "logits_to_keep", logits_to_keep, low=0)
            hidden = hidden[:, -logits_to_keep:]
        return self.lm_head(hidden)
