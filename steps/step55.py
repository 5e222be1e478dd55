"""Step 55: pipeline schedules as data -- simulated, checked, drawn, then run.

A pipeline cuts a model into stages on different ranks and a batch into micro-batches.
*When* each rank runs each micro-batch's forward (F) and backward (B) is the schedule.
In LeZero a schedule is plain data -- a list of ``Op(rank, step, action, micro_batch)`` --
so the same object is

* simulated: how long each rank sits idle (the *bubble*: (p-1)/(m+p-1) of the time for
  GPipe and 1F1B with p stages and m micro-batches) and how many activations it holds;
* checked before it runs: a schedule that would deadlock is refused with a message that
  says which rank waits for what;
* drawn, as text and as a picture;
* run by ``parallel.Pipeline``, op by op, over send/recv.

GPipe runs every forward, then every backward: each stage holds all m activations.  1F1B
starts backwards as soon as possible: the same bubble with at most p - rank activations.
Interleaving (several model chunks per rank) shrinks the bubble further.
Run: python steps/step55.py
"""
import os
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, parallel

try:
    parallel.init()              # the world the pipeline at the end runs on
except ImportError as e:         # under mpiexec without mpi4py: the install hint, one line
    raise SystemExit(str(e)) from None

p, m = 4, 8
gpipe, one = parallel.gpipe(p, m), parallel.one_f_one_b(p, m)
print("1. the first ops of 1F1B:", list(one)[:3])
print(gpipe.text())
print(one.text())

print("\n2. simulated (backward = 2 x forward) against (p-1)/(m+p-1):")
for micro in (1, 2, 4, 8, 16, 32):
    sims = [parallel.simulate(b(p, micro)) for b in (parallel.gpipe, parallel.one_f_one_b)]
    print(f"   m={micro:>2}: GPipe {sims[0].bubble:6.1%}  1F1B {sims[1].bubble:6.1%}  theory "
          f"{parallel.bubble_theory('gpipe', p, micro):6.1%}   peak activations GPipe "
          f"{sims[0].peak_activations}, 1F1B {sims[1].peak_activations}")
inter = parallel.simulate(parallel.interleaved_one_f_one_b(p, m, chunks=2))
print(f"   interleaved, 2 chunks per rank, m={m}: bubble {inter.bubble:.1%} (theory "
      f"{parallel.bubble_theory('interleaved', p, m, 2):.1%})")

print("\n3. a schedule that deadlocks is refused before it runs:")
bad = [parallel.Op(0, 0, "F", 0), parallel.Op(0, 1, "B", 0), parallel.Op(0, 2, "F", 1),
       parallel.Op(0, 3, "B", 1), parallel.Op(1, 0, "F", 1), parallel.Op(1, 1, "F", 0),
       parallel.Op(1, 2, "B", 0), parallel.Op(1, 3, "B", 1)]
try:
    parallel.Schedule(bad, ranks=2, micro_batches=2)
except parallel.ScheduleError as e:
    print("   " + str(e).replace("\n", "\n   "))

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "1f1b.png")
    one.plot(path)
    print(f"\n4. drew the 1F1B timeline: {os.path.getsize(path):,} bytes of PNG")

# 5. The Pipeline runs exactly these ops.  Alone, every stage is on rank 0 (2 chunks,
#    interleaved); under mpiexec the stages spread over the ranks.  The gradient equals
#    the one-process gradient of the whole batch.
lz.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                      nn.Linear(16, 3))
x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
t = np.arange(8) % 3
F.cross_entropy(model(x), t).backward()
reference = {n: q.grad.data.copy() for n, q in model.named_parameters()}
model.zero_grad()
pipe = parallel.Pipeline(model, micro_batches=4, schedule="interleaved", chunks=2)
loss = pipe.step(x, t, F.cross_entropy)
gap = max(np.abs(q.grad.data - reference[n]).max() for n, q in pipe.named_model_parameters())
if pipe.comm.rank == 0:
    print(f"5. Pipeline ({pipe.schedule.name}, {pipe.n_stages} stages on {pipe.comm.size} "
          f"rank(s)): loss {loss:.4f}, largest gradient difference from one process "
          f"{gap:.1e}")
measured = pipe.measured_timeline()
if pipe.comm.rank == 0:
    print("   " + measured.summary())
