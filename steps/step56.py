"""Step 56: the process grid -- data x tensor x pipeline parallelism together.

Large models use all three at once.  ``Grid(dp, tp, pp)`` arranges the ranks as a
3-D array, tensor index fastest (``rank = tp + tp_size * (dp + dp_size * pp)``), so that
a tensor group -- which all-reduces inside every layer -- is a run of neighbouring ranks
(one node, NVLink), and pipeline neighbours -- which only pass activations -- are far
apart.  Each rank gets three sub-communicators: its tensor group, its data-parallel group
and its pipeline.

Part 1 prints layouts (``GridLayout``: the arithmetic alone, no processes needed).  Part 2
trains GPT-mini on a grid of the ranks this step runs on -- alone, ``Grid(1, 1, 1)``;
``mpiexec -n 4 python steps/step56.py`` uses ``Grid(1, 2, 2)`` -- and prints its loss
curve next to one process's with the whole batch: the same numbers.
Run: python steps/step56.py
"""
import numpy as np

import lezero as lz
from lezero import optim, parallel
from lezero.nn.models.gpt import GPT, GPTConfig

try:
    world = parallel.init()
except ImportError as e:         # under mpiexec without mpi4py: the install hint, one line
    raise SystemExit(str(e)) from None
say = print if world.rank == 0 else (lambda *a, **k: None)

say("1. two layouts:")
say(parallel.GridLayout(2, 2, 2).layout())
big = parallel.GridLayout(8, 8, 16)              # 1024 GPUs: 128 nodes of 8
say(f"\n   Grid(8, 8, 16): rank 500 is at {big.coords(500)}; its tensor group "
    f"{next(g for g in big.groups('tp') if 500 in g)} is one node of 8 GPUs; its "
    f"pipeline {next(g for g in big.groups('pp') if 500 in g)[:4]}... spans 16 nodes")

shape = {1: (1, 1, 1), 2: (1, 2, 1), 4: (1, 2, 2), 8: (2, 2, 2)}.get(world.size,
                                                                   (world.size, 1, 1))
grid = parallel.Grid(*shape)
say(f"\n2. GPT-mini on {grid.layout().splitlines()[0]}")
config = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=4, d_model=16)
rng = np.random.default_rng(0)
batches = [(rng.integers(0, 13, (8, 8)), rng.integers(0, 13, (8, 8)))] * 5   # memorise one batch

lz.manual_seed(0)
dense = GPT(config)
opt = optim.AdamW(dense.parameters(), lr=1e-2)
curve = []
for x, y in batches:
    opt.zero_grad()
    loss = dense.loss(x, y)
    loss.backward()
    opt.step()
    curve.append(loss.item())

lz.manual_seed(0)
gpt = parallel.GridGPT(config, grid, micro_batches=2)
opt = optim.AdamW(gpt.parameters(), lr=1e-2)
grid_curve = []
for x, y in batches:
    opt.zero_grad()
    grid_curve.append(gpt.step(x, y))
    opt.step()
say("   step  one process  grid")
for i, (a, b) in enumerate(zip(curve, grid_curve)):
    say(f"   {i:>4}  {a:11.6f}  {b:.6f}")
say(f"   largest difference {max(abs(a - b) for a, b in zip(curve, grid_curve)):.1e}")
