"""Step 49: data parallelism -- averaged gradients, started while backward still runs.

Why it works: a mean loss over a batch of B samples has the mean of the per-sample
gradients as its gradient, so K ranks that each take B/K samples and *average* their
gradients get exactly the one-process gradient of the whole batch.  The first part checks
that on two halves of a batch, in one process.

``parallel.DataParallel(model)`` does the averaging.  It cuts the parameters into
buckets (last layer first, the order backward produces gradients) and registers a
post-accumulate-grad hook on each parameter: when a bucket's last gradient is complete,
its all-reduce starts -- while backward goes on with the earlier layers -- and when the
last bucket is complete the hook waits for all of them, so ``loss.backward()`` returns
with averaged gradients and ``opt.step()`` needs nothing else.  ``no_sync()`` accumulates
micro-batches locally.  The timeline records, per bucket, when it was ready and when its
all-reduce ran.  Run alone this is a world of one rank (every all-reduce is a copy);
``mpiexec -n 2 python steps/step49.py`` runs it on two.
Run: python steps/step49.py
"""
import os
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim, parallel
from lezero.data.datasets import Digits

try:
    world = parallel.init()
except ImportError as e:         # under mpiexec without mpi4py: the install hint, one line
    raise SystemExit(str(e)) from None
lz.manual_seed(0)
data = Digits(train=True)
x_all = data.data.reshape(len(data.data), -1)[:256]
t_all = data.targets[:256]


def make_model():
    lz.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


# 1. The mean of the two halves' gradients is the whole batch's gradient.
model = make_model()
F.cross_entropy(model(x_all[:32]), t_all[:32]).backward()
whole = model[0].weight.grad.data.copy()
halves = []
for part in (slice(0, 16), slice(16, 32)):
    model.zero_grad()
    F.cross_entropy(model(x_all[part]), t_all[part]).backward()
    halves.append(model[0].weight.grad.data.copy())
gap = np.abs((halves[0] + halves[1]) / 2 - whole).max()
if world.rank == 0:
    print(f"batch of 32 vs mean of two halves of 16: largest gradient difference {gap:.2e}")

# 2. DataParallel: each rank its shard of every global batch of 32.
dp = parallel.DataParallel(make_model(), bucket_mb=0.01)       # small buckets to see them
opt = optim.SGD(dp.parameters(), lr=0.1, momentum=0.9)
if world.rank == 0:
    for b in dp.buckets:
        print(f"bucket {b['index']}: {b['params']} parameters, {b['bytes']:,} bytes: "
              f"{', '.join(b['names'])}")
local = 32 // world.size
for step in range(8):
    rows = slice(step * 32 + world.rank * local, step * 32 + (world.rank + 1) * local)
    loss = F.cross_entropy(dp(x_all[rows]), t_all[rows])
    opt.zero_grad()
    loss.backward()                    # gradients are averaged over the ranks on return
    opt.step()
    if world.rank == 0 and step % 3 == 0:
        print(f"step {step}: loss on my shard {loss.item():.4f}")

# 3. Gradient accumulation: two micro-batches, communication only on the second.
opt.zero_grad()
with dp.no_sync():
    (F.cross_entropy(dp(x_all[:local // 2]), t_all[:local // 2]) / 2).backward()
(F.cross_entropy(dp(x_all[local // 2:local]), t_all[local // 2:local]) / 2).backward()
opt.step()

# 4. The timeline, as text and as a Chrome trace (into a temporary folder).
timeline = dp.timeline()
folder = tempfile.mkdtemp()
path = os.path.join(folder, "timeline.json")
timeline.to_chrome_trace(path, comm=world)
if world.rank == 0:
    print(timeline.summary())
    print(f"{len(timeline)} synchronised steps recorded (the no_sync backward is not one); "
          f"trace written to {path}")
