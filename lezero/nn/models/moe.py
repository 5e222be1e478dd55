"""A decoder-only Transformer language model whose feed-forward layers are mixtures of
experts (``nn.MixtureOfExperts``), as in the Switch Transformer and Mixtral.

Each block is pre-norm: x + attn(ln_1(x)) (GPT-mini's causal self-attention), then
x + moe(ln_2(x)).  A token dropped by an expert's capacity keeps its residual, as in
Switch.  ``loss`` adds ``aux_loss_coef`` times the mean of the layers' load-balancing
losses to the next-token cross entropy.

While a trace records, the MoE layers route with LeZero operators (see
``nn.MixtureOfExperts``), so ``onnx.export`` writes the model with a dynamic batch and
sequence, routing and capacity computed in the file from its input
(tests/onnx/test_export_moe.py).
"""
import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.gpt import CausalSelfAttention, GPTConfig
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["MoETransformerLM"]


class MoEBlock(nn.Module):
    """x + attn(ln_1(x)), then x + moe(ln_2(x))."""

    def __init__(self, gpt_config, d_ff, num_experts, top_k, capacity_factor):
        super().__init__()
        d = gpt_config.d_model
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(gpt_config)
        self.ln_2 = nn.LayerNorm(d)
        self.moe = nn.MixtureOfExperts(d, d_ff, num_experts, top_k, capacity_factor,
                                       dropout=gpt_config.dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.moe(self.ln_2(x))


@register_model("moe_transformer")
class MoETransformerLM(nn.Module):
    """``MoETransformerLM(vocab_size, block_size=64, d_model=64, n_layer=2, n_head=4,
    d_ff=128, num_experts=4, top_k=2, capacity_factor=None, dropout=0.0,
    aux_loss_coef=0.01)``; ``forward(idx)`` maps ids (B, T) to logits (B, T, vocab).

    Names: ``wte``, ``wpe``, ``blocks.i.{ln_1, attn, ln_2, moe.gate, moe.experts.j}``,
    ``ln_f``, ``lm_head`` (tied to ``wte``)."""

    def __init__(self, vocab_size, block_size=64, d_model=64, n_layer=2, n_head=4,
                 d_ff=128, num_experts=4, top_k=2, capacity_factor=None, dropout=0.0,
                 aux_loss_coef=0.01):
        super().__init__()
        name = "MoETransformerLM"
        for arg, value in (("vocab_size", vocab_size), ("block_size", block_size),
                           ("n_layer", n_layer)):
            check_int(name, arg, value, low=1)
        self.aux_loss_coef = check_number(name, "aux_loss_coef", aux_loss_coef, low=0.0)
        cfg = GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer,
                        n_head=n_head, d_model=d_model, dropout=dropout)
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([MoEBlock(cfg, d_ff, num_experts, top_k,
                                              capacity_factor) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        idx = idx.data if isinstance(idx, lz.Variable) else idx
        if getattr(idx, "ndim", None) != 2 or idx.shape[1] > self.block_size:
            raise ValueError(f"MoETransformerLM: idx must be (batch, seq <= "
                             f"{self.block_size}), got shape {getattr(idx, 'shape', None)}")
        xp = cuda.get_array_module(idx)
        x = self.drop(self.wte(idx) + self.wpe(xp.arange(idx.shape[1])))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def aux_loss(self):
        """The mean load-balancing loss of the last forward's MoE layers."""
        losses = [b.moe.aux_loss for b in self.blocks]
        return sum(losses[1:], losses[0]) / len(losses)

    def loss(self, idx, targets):
        """Next-token cross entropy + ``aux_loss_coef`` * ``aux_loss()``; returns
        ``(total, cross_entropy)``."""
        logits = self(idx)
        targets = targets.data if isinstance(targets, lz.Variable) else targets
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return ce + self.aux_loss_coef * self.aux_loss(), ce
