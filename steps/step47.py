"""Step 47: a memory profiler: what does backward keep, and who keeps it?

Every recorded Function holds its inputs (and whatever it stored for its backward) until
the graph is dropped.  ``lz.memory.profile()`` is a FunctionHook that sees each Function
as it is recorded and counts those arrays: each buffer once, however many views or
Functions share it, released when the last holder goes.  Its *saved* figures are exact;
its *live* figure is every array alive (NumPy reports its allocations to ``tracemalloc``;
on CuPy, CuPy's memory pool is sampled).  ``print_saved_residuals`` lists what one call
keeps, like JAX's; ``by_module()`` says which layer keeps how much.
Run: python steps/step47.py
"""
import os
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import amp, nn

lz.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10))
x = lz.Variable(np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32),
                requires_grad=False)
t = np.arange(8) % 10

print("what one forward keeps for backward:")
lz.memory.print_saved_residuals(lambda v: F.cross_entropy(model(v), t), x)

with lz.memory.profile(model) as prof:
    loss = F.cross_entropy(model(x), t)
    loss.backward()
    del loss
print(f"\npeak saved {prof.peak_saved_bytes} B (activations {prof.peak_activation_bytes} B), "
      f"peak live {prof.peak_live_bytes} B")
print("per module:", {k or "(all)": v for k, v in prof.by_module().items()})

with amp.autocast():
    rows = lz.memory.saved_residuals(lambda v: model(v).sum(), x)
print("\nunder autocast the linear layers keep float16:",
      sorted({(r.op, r.dtype) for r in rows if r.op == "Linear"}))

# Peak saved memory against depth, plain and checkpointed, as a plot.
depths, plain, ckpt = [2, 8, 32], [], []
for depth in depths:
    deep = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(64, 64), nn.ReLU())])
    v = lz.Variable(np.ones((32, 64), np.float32), requires_grad=False)
    for run, out in ((deep, plain), (lz.checkpoint_sequential(deep, "sqrt"), ckpt)):
        out.append(lz.memory.measure(lambda: run(v).mean())["peak_activation_bytes"])
print("\ndepth, plain, checkpointed (bytes):", list(zip(depths, plain, ckpt)))
path = lz.memory.plot_memory_vs_depth(depths, {"plain": plain, "checkpoint_sequential": ckpt},
                                      os.path.join(tempfile.mkdtemp(), "memory_depth.png"))
print("plot written to", path)
