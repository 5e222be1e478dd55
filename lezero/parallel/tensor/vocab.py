"""``VocabParallelEmbedding``: an embedding table whose rows (the vocabulary) are split.

Rank r holds rows ``[r * n, (r + 1) * n)`` of the table, ``n = padded / size``, where the
vocabulary is padded with zero rows up to a multiple of the tensor size (Megatron's
padding; the padded ids are never looked up).  A token id outside this rank's range looks
up row 0 and is multiplied by zero, so each rank contributes exactly the rows it owns;
``reduce_from_parallel_region`` (all-reduce forward, identity backward) sums the
contributions into the full embedding on every rank.  A row's gradient lands on the one
rank that owns it.

The table has the same layout as a column-parallel output head over the same vocabulary,
so the two can share their weight (GPT's tied embedding) with no communication.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Parameter, Variable
from lezero.nn.module import Module
from lezero.parallel.collectives import reduce_from_parallel_region
from lezero.parallel.tensor.sharding import make_spec, shard, tp_comm
from lezero.utils.checks import check_int


def token_ids(where, ids, vocab_size):
    """The int array behind ``ids``, every id checked to be in [0, vocab_size)."""
    data = ids.data if isinstance(ids, Variable) else ids
    if not isinstance(data, cuda.array_types()):
        data = np.asarray(data)
    if data.dtype.kind not in "iu":
        raise TypeError(f"{where}: token ids must be integers, got dtype {data.dtype}")
    if data.size:
        lo, hi = int(data.min()), int(data.max())
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{where}: token id {bad} is out of range for a vocabulary of "
                             f"{vocab_size} (ids must be in [0, {vocab_size}))")
    return data


class VocabParallelEmbedding(Module):
    """An ``nn.Embedding(num_embeddings, embedding_dim)`` whose rows are split over the
    ranks of ``comm`` (default: the current Grid's tensor group, else the world).

    ``weight`` is this rank's (padded / size, embedding_dim) block; ``vocab_start_index``
    and ``vocab_end_index`` the ids it covers (the last ranks' blocks may end in
    padding).  Initialised as the dense ``nn.Embedding`` (N(0, 1), the same draws)."""

    def __init__(self, num_embeddings, embedding_dim, comm=None):
        super().__init__()
        where = type(self).__name__
        self.num_embeddings = check_int(where, "num_embeddings", num_embeddings, 1)
        self.embedding_dim = check_int(where, "embedding_dim", embedding_dim, 1)
        self.comm = tp_comm(comm, where)
        spec = make_spec(where, 0, self.num_embeddings, self.comm.size, pad=True)
        self.tp_shard_specs = {"weight": spec}
        per = spec.local(self.comm.size)
        self.vocab_start_index = self.comm.rank * per
        self.vocab_end_index = self.vocab_start_index + per
        from lezero import nn
        dense = nn.Embedding(self.num_embeddings, self.embedding_dim)
        self.weight = Parameter(shard(dense.weight.data, spec, self.comm.rank, self.comm.size))

    @property
    def padded_num_embeddings(self):
        return self.tp_shard_specs["weight"].padded

    def forward(self, ids):
        data = token_ids(type(self).__name__, ids, self.num_embeddings)
        xp = cuda.get_array_module(data)
        mine = (data >= self.vocab_start_index) & (data < self.vocab_end_index)
        local = xp.where(mine, data - self.vocab_start_index, 0)
        rows = F.embedding(local, self.weight)
        if self.comm.size > 1:        # alone, every id is ours: nothing to mask or sum
            rows = rows * mine[..., None].astype(rows.dtype)
        return reduce_from_parallel_region(rows, self.comm)

    def extra_repr(self):
        return (f"{self.num_embeddings}, {self.embedding_dim}, rows "
                f"[{self.vocab_start_index}, {self.vocab_end_index}) of "
                f"{self.padded_num_embeddings} on rank {self.comm.rank} of {self.comm.size}")
