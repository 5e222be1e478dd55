"""A tensor-parallel GPT-mini with ``lezero.nn.models.GPT``'s names, and its pipeline stages.

    tp = parallel.ParallelGPT(GPTConfig(vocab_size=65, n_layer=4), comm=grid.tp_comm)
    load_dense_state_dict(tp, dense_gpt.state_dict())     # or a PyTorch nanoGPT's
    loss = tp.loss(idx, targets)                          # equals the dense model's loss

* the token embedding is a ``VocabParallelEmbedding`` and the head a column-parallel
  linear over the (padded) vocabulary; with ``tie_weights`` they are one Parameter,
  as in the dense model (same layout: rows of the vocabulary);
* blocks are ``ParallelBlock``; the position embedding and the final layer norm are
  replicated;
* ``forward`` returns this rank's slice of the logits (never the full vocabulary);
  ``loss`` is ``vocab_parallel_cross_entropy`` over it; ``gather_logits`` assembles the
  full logits when they are wanted (generation, tests).

Initialisation: a ParallelGPT seeded like a dense GPT holds the dense GPT's values
exactly: it builds its own layers, then rewinds the generator, builds the dense model
(the same draws in the same order) and loads its state dict sharded.

``pipeline_stages(n)`` cuts the model into ``n`` stages for ``Pipeline`` -- the
embeddings with the first blocks, the final norm and the head with the last -- each a
``GPTStage`` whose state-dict keys are the dense model's.
"""
from lezero import cuda, nn
from lezero import random as lz_random
from lezero.core import Variable
from lezero.nn.module import Module
from lezero.parallel.collectives import gather_from_parallel_region
from lezero.parallel.tensor.cross_entropy import vocab_parallel_cross_entropy
from lezero.parallel.tensor.linear import ColumnParallelLinear
from lezero.parallel.tensor.sharding import tp_comm
from lezero.parallel.tensor.state import load_dense_state_dict
from lezero.parallel.tensor.transformer import ParallelBlock
from lezero.parallel.tensor.vocab import VocabParallelEmbedding, token_ids
from lezero.utils.checks import check_int


def _config(config, overrides):
    from dataclasses import fields

    from lezero.nn.models.gpt import GPTConfig
    config = config or GPTConfig()
    unknown = set(overrides) - {f.name for f in fields(GPTConfig)}
    if unknown:
        raise TypeError(f"ParallelGPT: unknown config fields {sorted(unknown)}")
    return GPTConfig(**{**config.__dict__, **overrides})


class ParallelGPT(Module):
    """GPT-mini split over the tensor group ``comm`` (default: the current Grid's, else
    the world).  See the module docstring."""

    def __init__(self, config=None, comm=None, **overrides):
        super().__init__()
        config = _config(config, overrides)
        self.config = config
        self.comm = comm = tp_comm(comm, "ParallelGPT")
        saved = lz_random.get_rng_state()
        d = config.d_model
        self.transformer = nn.ModuleDict(dict(
            wte=VocabParallelEmbedding(config.vocab_size, d, comm),
            wpe=nn.Embedding(config.block_size, d),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([ParallelBlock(config, comm) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(d, bias=config.bias)))
        self.lm_head = ColumnParallelLinear(d, config.vocab_size, bias=False, comm=comm)
        if config.tie_weights:
            self.transformer["wte"].weight = self.lm_head.weight
        lz_random.set_rng_state(saved)            # the dense model's draws, in its order
        from lezero.nn.models.gpt import GPT
        load_dense_state_dict(self, GPT(config).state_dict())

    def embed(self, idx):
        idx = token_ids("ParallelGPT", idx, self.config.vocab_size)
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"ParallelGPT: sequence length {T} exceeds block_size "
                             f"{self.config.block_size}")
        xp = cuda.get_array_module(idx)
        tr = self.transformer
        return tr["drop"](tr["wte"](idx) + tr["wpe"](xp.arange(T)))

    def head(self, x):
        """This rank's logits slice (B, T, padded vocab / size) from the last hidden state."""
        return self.lm_head(self.transformer["ln_f"](x))

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.transformer["h"]:
            x = block(x)
        return self.head(x)

    def loss(self, idx, targets, label_smoothing=0.0):
        """Mean next-token cross entropy (the dense ``GPT.loss``), vocabulary-parallel."""
        return lm_loss(self.lm_head, self(idx), targets, self.config.vocab_size,
                       label_smoothing)

    def gather_logits(self, logits_shard):
        """The full (B, T, vocab_size) logits from every rank's slice (collective)."""
        full = gather_from_parallel_region(logits_shard, -1, self.comm)
        return self.lm_head.to_dense_order(full)

    def pipeline_stages(self, n):
        """``n`` GPTStages cutting this model for a Pipeline (blocks spread evenly)."""
        n = check_int("ParallelGPT.pipeline_stages", "n", n, 1, max(self.config.n_layer, 1))
        L = self.config.n_layer
        bounds = [round(k * L / n) for k in range(n + 1)]
        return [GPTStage(self, range(bounds[k], bounds[k + 1]), first=k == 0,
                         last=k == n - 1) for k in range(n)]

    def tied_names(self):
        """The tied pair a Pipeline needs (empty when the weights are not tied)."""
        return [("transformer.wte.weight", "lm_head.weight")] if self.config.tie_weights \
            else []


def lm_loss(lm_head, logits_shard, targets, vocab_size, label_smoothing=0.0):
    """Vocabulary-parallel next-token loss of (B, T, V/size) logits against (B, T) ids."""
    t = targets.data if isinstance(targets, Variable) else targets
    return vocab_parallel_cross_entropy(logits_shard, t, lm_head.comm,
                                        label_smoothing=label_smoothing,
                                        vocab_size=vocab_size)


class GPTStage(Module):
    """Blocks ``blocks`` of a ParallelGPT, with the embeddings when ``first`` and the
    final norm and head when ``last``; keys as in the dense model (``transformer.h.3...``).
    The last stage returns the logits slice; ``loss_fn`` is the vocabulary-parallel loss."""

    def __init__(self, gpt, blocks, first, last):
        super().__init__()
        tr = gpt.transformer
        parts = {}
        if first:
            parts.update(wte=tr["wte"], wpe=tr["wpe"], drop=tr["drop"])
        parts["h"] = nn.ModuleDict({str(i): tr["h"][i] for i in blocks})
        if last:
            parts["ln_f"] = tr["ln_f"]
        self.transformer = nn.ModuleDict(parts)
        if last:
            self.lm_head = gpt.lm_head
        self.first, self.last, self._gpt = first, last, [gpt]   # a list: not a child

    def forward(self, x):
        gpt = self._gpt[0]
        if self.first:
            x = gpt.embed(x)
        for block in self.transformer["h"].values():
            x = block(x)
        return gpt.head(x) if self.last else x

    def loss_fn(self, logits_shard, targets):
        gpt = self._gpt[0]
        return lm_loss(gpt.lm_head, logits_shard, targets, gpt.config.vocab_size)
