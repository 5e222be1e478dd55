"""GPT-mini: a decoder-only Transformer language model in the GPT-2 layout.

Submodule names follow the widely used nanoGPT layout (``transformer.wte``,
``transformer.wpe``, ``transformer.h.0.ln_1``, ``attn.c_attn``, ``attn.c_proj``,
``mlp.c_fc``, ``mlp.c_proj``, ``transformer.ln_f``, ``lm_head``) with ``nn.Linear``
weights, so a PyTorch model written that way shares its ``state_dict`` with this one.
"""
import math
from dataclasses import dataclass, fields

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn


@dataclass
class GPTConfig:
    """The shape of a GPT: vocabulary, context length, depth, heads and width.

    ``tie_weights`` shares the token embedding with the output head (as GPT-2 does);
    ``bias`` gives the linear layers and layer norms biases.
    """
    vocab_size: int = 256
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t sees positions <= t.

    One linear layer ``c_attn`` makes queries, keys and values together; the heads run
    in one call to ``F.scaled_dot_product_attention(is_causal=True)``.
    """

    def __init__(self, config):
        super().__init__()
        if config.d_model % config.n_head:
            raise ValueError(f"CausalSelfAttention: d_model {config.d_model} is not divisible "
                             f"by n_head {config.n_head}")
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model, bias=config.bias)
        self.c_proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.dropout = config.n_head, config.dropout

    def forward(self, x):
        B, T, C = x.shape
        # Split (B, T, 3C) along the features, then each part to (B, heads, T, head).
        # (Cheaper than one 5-D transpose and indexing: the split's backward is a single
        # concatenation; indexing's would scatter into three full-size zero arrays.
        # Measured: attention forward + backward 6.5 ms instead of 13.4 ms per block.)
        q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head).transpose(0, 2, 1, 3)
                   for t in F.split(self.c_attn(x), 3, axis=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """The position-wise feed-forward network: d -> 4d -> GELU -> d."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, 4 * config.d_model, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.d_model, config.d_model, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """A pre-norm Transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A GPT language model: token and position embeddings, ``n_layer`` blocks, a final
    layer norm and a linear head over the vocabulary.

    ``GPT(GPTConfig(...))`` or ``GPT(vocab_size=65, n_layer=4, ...)``.  ``forward(idx)``
    maps int token ids (B, T) with T <= block_size to logits (B, T, vocab_size);
    ``loss(idx, targets)`` is the mean next-token cross entropy; ``generate`` samples.
    """

    def __init__(self, config=None, **overrides):
        super().__init__()
        config = config or GPTConfig()
        unknown = set(overrides) - {f.name for f in fields(GPTConfig)}
        if unknown:
            raise TypeError(f"GPT: unknown config fields {sorted(unknown)}")
        config = GPTConfig(**{**config.__dict__, **overrides})
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.d_model),
            wpe=nn.Embedding(config.block_size, config.d_model),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.d_model, bias=config.bias)))
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.transformer["wte"].weight = self.lm_head.weight
        self._init_weights(config)

    def _init_weights(self, config):
        """GPT-2's scheme: N(0, 0.02) everywhere, zero biases, and residual projections
        scaled by 1/sqrt(2 n_layer) so the residual stream's variance stays put."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * config.n_layer))

    def forward(self, idx):
        idx = idx.data if isinstance(idx, lz.Variable) else idx
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"GPT: sequence length {T} exceeds block_size "
                             f"{self.config.block_size}")
        xp = cuda.get_array_module(idx)
        tr = self.transformer
        x = tr["drop"](tr["wte"](idx) + tr["wpe"](xp.arange(T)))
        for block in tr["h"]:
            x = block(x)
        return self.lm_head(tr["ln_f"](x))

    def loss(self, idx, targets):
        """Mean cross entropy of predicting ``targets`` (B, T) from ``idx`` (B, T)."""
        logits = self(idx)
        targets = targets.data if isinstance(targets, lz.Variable) else targets
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Append ``max_new_tokens`` sampled tokens to ``idx`` (B, T) and return the ids.

        Each step feeds the last ``block_size`` tokens, divides the final logits by
        ``temperature`` (-> 0 approaches greedy decoding), keeps the ``top_k`` most
        likely tokens when given, and samples from LeZero's process generator.
        """
        if temperature <= 0:
            raise ValueError(f"GPT.generate: temperature must be positive, got {temperature}")
        idx = cuda.as_numpy(idx.data if isinstance(idx, lz.Variable) else idx)
        idx = np.array(idx, dtype=np.int64, ndmin=2)
        rng = lz.get_rng()
        xp = cuda.get_array_module(self.lm_head.weight.data)   # the model's device
        was_training = self.training
        self.eval()
        try:
            with lz.no_grad():
                for _ in range(max_new_tokens):
                    context = xp.asarray(idx[:, -self.config.block_size:])
                    logits = cuda.as_numpy(self(context).data[:, -1, :]).astype(np.float64)
                    logits /= temperature
                    if top_k is not None and top_k < logits.shape[-1]:
                        kth = np.sort(logits, axis=-1)[:, -top_k][:, None]
                        logits[logits < kth] = -np.inf
                    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
                    probs /= probs.sum(axis=-1, keepdims=True)
                    nxt = [rng.choice(len(p), p=p) for p in probs]
                    idx = np.concatenate([idx, np.array(nxt, dtype=np.int64)[:, None]], axis=1)
        finally:
            self.train(was_training)
        return idx
