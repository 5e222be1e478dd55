"""Step 46: gradient checkpointing: forget activations, recompute them in backward.

Backward needs what forward computed: every layer keeps its input until the gradient
has passed.  A deep network's memory is therefore its depth times one activation.
``lz.checkpoint(block, x)`` runs ``block`` without recording anything and records one
node in its place, holding only the block's inputs (and the parameters it touched).
When the gradient reaches that node, the block runs again, this time recording, and the
gradient flows through the fresh graph.  ``lz.checkpoint_sequential(layers, "sqrt")``
cuts n layers into about sqrt(n) such blocks: sqrt(n) boundaries are kept plus one block
at a time during backward, so memory grows as sqrt(n) for one extra forward pass.
The recomputation replays the random generator, so dropout draws the same mask, and
the gradients are bit-for-bit those of the plain run.
Run: python steps/step46.py
"""
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn

lz.manual_seed(0)


def deep_mlp(depth, width=128):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.Tanh(), nn.Dropout(0.1)]
    return nn.Sequential(*layers)


model = deep_mlp(16)
x = lz.Variable(np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32),
                requires_grad=False)


def gradients(run):
    model.zero_grad()
    lz.manual_seed(1)                 # the same dropout masks for both runs
    with lz.memory.profile() as prof:
        t0 = time.perf_counter()
        (run(x) ** 2).mean().backward()
        seconds = time.perf_counter() - t0
    return [p.grad.data.copy() for p in model.parameters()], prof.peak_activation_bytes, seconds


plain, plain_bytes, plain_s = gradients(model)
ckpt, ckpt_bytes, ckpt_s = gradients(lz.checkpoint_sequential(model, "sqrt"))
same = all(np.array_equal(a, b) for a, b in zip(plain, ckpt))
print(f"16 layers: plain {plain_bytes / 2 ** 10:.0f} KiB saved, checkpointed "
      f"{ckpt_bytes / 2 ** 10:.0f} KiB ({ckpt_bytes / plain_bytes:.2f}x); "
      f"time {ckpt_s / plain_s:.2f}x; gradients bit-identical: {same}")

# How the saved memory grows with depth: linearly, or as sqrt(depth).
for depth in (4, 16, 64):
    m = deep_mlp(depth, width=32)
    v = lz.Variable(np.ones((16, 32), np.float32), requires_grad=False)
    row = []
    for run in (m, lz.checkpoint_sequential(m, "sqrt")):
        with lz.memory.profile(live=False) as prof:
            run(v).sum().backward()
        row.append(prof.peak_activation_bytes / (16 * 32 * 4))
    print(f"depth {depth:>3}: plain {row[0]:5.0f} activations, checkpointed {row[1]:4.0f} "
          f"(sqrt(depth) = {np.sqrt(depth):.0f})")

# One block by hand: the graph holds a single Checkpoint node instead of the block.
block = nn.Sequential(nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 128))
y = lz.checkpoint(block, x)
print("recorded:", type(y.creator).__name__, "with", len(y.creator.inputs),
      "inputs (the block's 4 parameters; x needs no gradient)")
y.sum().backward()
print("block.0.weight received a gradient:", block[0].weight.grad is not None)

# Keep the expensive products instead of recomputing them (JAX's checkpoint policies).
y = lz.checkpoint(block, x, policy="dots_saveable")
print("with policy='dots_saveable' the node also keeps",
      len(y.creator.block.kept), "linear outputs")
F.mean(y).backward()
