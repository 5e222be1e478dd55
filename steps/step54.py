"""Step 54: tensor parallelism -- one layer's weight split over several ranks.

Megatron-LM's observation: in an MLP ``Y = GELU(X A) B`` split ``A`` by *columns* and
``B`` by *rows*.  Rank r computes ``GELU(X A_r) B_r`` with no communication at all (GELU
acts element by element on its own columns), and the output is the *sum* over ranks --
one all-reduce forward.  Backward mirrors it: the gradient of ``X`` is a sum of the ranks'
contributions, one all-reduce.  Part 1 checks the algebra in one process with two
"ranks" made by hand.

Part 2 uses the real layers (``ColumnParallelLinear``, ``RowParallelLinear``,
``VocabParallelEmbedding``, ``vocab_parallel_cross_entropy``) on the world: alone it is a
world of one (every collective a copy), ``mpiexec -n 2 python steps/step54.py`` splits
the weights over two ranks and prints the same numbers.  The vocabulary (11 here) need not
divide by the ranks: it is padded, and the padding is masked out of the loss.
Run: python steps/step54.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, parallel
from lezero.nn.models.gpt import GPT, GPTConfig
from lezero.parallel.tensor import shard_specs

try:
    world = parallel.init()
except ImportError as e:         # under mpiexec without mpi4py: the install hint, one line
    raise SystemExit(str(e)) from None
say = print if world.rank == 0 else (lambda *a, **k: None)

# 1. The algebra, two ranks by hand: columns of A, rows of B.
rng = np.random.default_rng(0)
X, A, B = rng.standard_normal((4, 6)), rng.standard_normal((6, 8)), rng.standard_normal((8, 3))
dense = F.gelu(lz.Variable(X @ A)).data @ B
parts = [F.gelu(lz.Variable(X @ A[:, c])).data @ B[c] for c in (slice(0, 4), slice(4, 8))]
say(f"1. |dense - (rank 0 + rank 1)| = {np.abs(dense - sum(parts)).max():.1e}  "
    "(one all-reduce of the partial outputs)")

# 2. The layers: a parallel MLP equals the dense one, forward and backward.
config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=4, d_model=16)
lz.manual_seed(0)
mlp_dense = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))
lz.manual_seed(0)                              # parallel layers draw the dense weights
mlp = nn.Sequential(parallel.ColumnParallelLinear(16, 64), nn.GELU(),
                    parallel.RowParallelLinear(64, 16))
x = rng.standard_normal((2, 5, 16)).astype(np.float32)
y, yd = mlp(x), mlp_dense(x)
say(f"2. parallel MLP on {world.size} rank(s): weight shard {mlp[0].weight.shape} of "
    f"{mlp_dense[0].weight.shape}; |y - y_dense| = {np.abs(y.data - yd.data).max():.1e}")

# 3. GPT-mini split over the ranks: the same loss as the dense model, from split logits.
lz.manual_seed(0)
dense_gpt = GPT(config)
lz.manual_seed(0)
gpt = parallel.ParallelGPT(config)
idx, tgt = rng.integers(0, 11, (2, 8)), rng.integers(0, 11, (2, 8))
shard = gpt(idx)
say(f"3. logits slice on this rank {tuple(shard.shape)} (vocabulary 11 padded to "
    f"{gpt.transformer['wte'].padded_num_embeddings}); loss {gpt.loss(idx, tgt).item():.6f}, "
    f"dense {dense_gpt.loss(idx, tgt).item():.6f}")
z = shard.data.reshape(-1, shard.shape[-1])
smooth = parallel.vocab_parallel_cross_entropy(z, tgt.reshape(-1), label_smoothing=0.1,
                                               vocab_size=11)
full = gpt.gather_logits(shard).data.reshape(-1, 11)
say(f"   with label smoothing 0.1: {smooth.item():.6f} (full logits: "
    f"{F.cross_entropy(full, tgt.reshape(-1), label_smoothing=0.1).item():.6f})")

# 4. What each weight's shard is, and what a training step communicates.
say("4. how the weights are split (axis, dense length, padded, stride):")
for key, (spec, _) in list(shard_specs(gpt).items())[:6]:
    say(f"   {key:<36} {tuple(spec)}")
with parallel.CommAccounting(gpt) as acc:
    gpt.loss(idx, tgt).backward()
say("   one step's collectives:\n" + "\n".join("   " + line for line in acc.table().splitlines()))

# 5. A dense state dict (PyTorch's layout) loads into the sharded model, and back.
parallel.load_dense_state_dict(gpt, dense_gpt.state_dict())
back = parallel.dense_state_dict(gpt)
worst = max(np.abs(back[k] - v).max() for k, v in dense_gpt.state_dict().items())
say(f"5. dense -> shards -> dense: largest difference {worst:.1e} over {len(back)} tensors")
