"""Tensor (Megatron-LM) parallelism: layers whose weights are split over a tensor group.

* ``ColumnParallelLinear``, ``RowParallelLinear`` (``linear.py``);
* ``VocabParallelEmbedding`` (``vocab.py``) and ``vocab_parallel_cross_entropy``
  (``cross_entropy.py``), with vocabularies padded to the tensor size and masked;
* ``ParallelCausalSelfAttention`` (split by heads), ``ParallelMLP``, ``ParallelBlock``
  (``transformer.py``) and ``ParallelGPT`` with its pipeline stages (``gpt.py``);
* dropout randomness per tensor rank (``rng.py``);
* dense state dicts in and out (``state.py``), sharded checkpoints (``checkpoint.py``);
* the sharding layout itself (``sharding.py``).
"""
from lezero.parallel.tensor.checkpoint import (consolidate_checkpoint, load_sharded_checkpoint,
                                               save_sharded_checkpoint)
from lezero.parallel.tensor.cross_entropy import vocab_parallel_cross_entropy
from lezero.parallel.tensor.gpt import GPTStage, ParallelGPT
from lezero.parallel.tensor.linear import ColumnParallelLinear, RowParallelLinear
from lezero.parallel.tensor.rng import (model_parallel_manual_seed, model_parallel_rng,
                                        model_parallel_seed)
from lezero.parallel.tensor.sharding import ShardSpec, shard, unshard
from lezero.parallel.tensor.state import (dense_state_dict, load_dense_state_dict,
                                          shard_specs, shard_state_dict)
from lezero.parallel.tensor.transformer import (ParallelBlock, ParallelCausalSelfAttention,
                                                ParallelMLP)
from lezero.parallel.tensor.vocab import VocabParallelEmbedding

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "ParallelCausalSelfAttention", "ParallelMLP",
           "ParallelBlock", "ParallelGPT", "GPTStage", "model_parallel_manual_seed",
           "model_parallel_rng", "model_parallel_seed", "ShardSpec", "shard", "unshard",
           "load_dense_state_dict", "dense_state_dict", "shard_state_dict", "shard_specs",
           "save_sharded_checkpoint", "load_sharded_checkpoint", "consolidate_checkpoint"]
