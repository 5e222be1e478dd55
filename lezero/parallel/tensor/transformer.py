"""A tensor-parallel GPT block, built to match ``lezero.nn.models.GPT``'s block.

The submodules have the dense block's names (``ln_1``, ``attn.c_attn``, ``attn.c_proj``,
``ln_2``, ``mlp.c_fc``, ``mlp.c_proj``), so a dense ``state_dict`` maps onto the shards
key by key (``state.py``).  Megatron's split:

* attention by heads: ``c_attn`` is column-parallel with stride 3 (each rank computes
  the queries, keys and values of ``n_head / size`` heads), attention runs on those heads
  alone, ``c_proj`` is row-parallel (input already split by heads) -- one all-reduce
  forward, one backward;
* the MLP: ``c_fc`` column-parallel (d -> 4d/size), GELU on the slice, ``c_proj``
  row-parallel -- again one all-reduce each way;
* layer norms and the residual stream are replicated (identical on every rank).

Dropout: attention-probability dropout acts on split activations and draws from the
model-parallel generator (``rng.py``); the residual dropouts act on replicated ones and
draw from the shared default generator, so every rank drops the same elements.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.module import Module
from lezero.parallel.tensor.linear import ColumnParallelLinear, RowParallelLinear
from lezero.parallel.tensor.rng import model_parallel_rng
from lezero.parallel.tensor.sharding import tp_comm


def _heads_per_rank(where, config, comm):
    if config.d_model % config.n_head:
        raise ValueError(f"{where}: d_model {config.d_model} is not divisible by n_head "
                         f"{config.n_head}")
    if config.n_head % comm.size:
        raise ValueError(f"{where}: n_head {config.n_head} does not divide into {comm.size} "
                         "tensor-parallel ranks (attention is split by heads)")
    return config.n_head // comm.size


class ParallelCausalSelfAttention(Module):
    """Causal multi-head self-attention with the heads split over the tensor group."""

    def __init__(self, config, comm=None):
        super().__init__()
        where = type(self).__name__
        comm = tp_comm(comm, where)
        self.n_local_heads = _heads_per_rank(where, config, comm)
        self.comm = comm
        d = config.d_model
        self.c_attn = ColumnParallelLinear(d, 3 * d, bias=config.bias, comm=comm, stride=3)
        self.c_proj = RowParallelLinear(d, d, bias=config.bias, comm=comm,
                                        input_is_parallel=True)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.head_dim, self.dropout = config.n_head, d // config.n_head, \
            config.dropout

    def forward(self, x):
        B, T, _ = x.shape
        h, hd = self.n_local_heads, self.head_dim
        q, k, v = (t.reshape(B, T, h, hd).transpose(0, 2, 1, 3)
                   for t in F.split(self.c_attn(x), 3, axis=-1))
        p = self.dropout if self.training else 0.0
        if p:
            with model_parallel_rng(self.comm):     # this rank's heads: its own masks
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, h * hd)
        return self.resid_dropout(self.c_proj(y))


class ParallelMLP(Module):
    """d -> 4d -> GELU -> d with the hidden features split over the tensor group."""

    def __init__(self, config, comm=None):
        super().__init__()
        comm = tp_comm(comm, type(self).__name__)
        d = config.d_model
        self.c_fc = ColumnParallelLinear(d, 4 * d, bias=config.bias, comm=comm)
        self.gelu = nn.GELU()
        self.c_proj = RowParallelLinear(4 * d, d, bias=config.bias, comm=comm,
                                        input_is_parallel=True)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class ParallelBlock(Module):
    """The pre-norm block: x + attn(ln_1(x)), then x + mlp(ln_2(x)); tensor-parallel."""

    def __init__(self, config, comm=None):
        super().__init__()
        comm = tp_comm(comm, type(self).__name__)
        self.ln_1 = nn.LayerNorm(config.d_model, bias=config.bias)
        self.attn = ParallelCausalSelfAttention(config, comm)
        self.ln_2 = nn.LayerNorm(config.d_model, bias=config.bias)
        self.mlp = ParallelMLP(config, comm)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))
