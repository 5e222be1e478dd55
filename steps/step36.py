"""Step 36: checkpoints: save a training run, load it into fresh objects, resume exactly.

``lz.save(obj, path)`` writes nested dicts/lists of arrays and plain values; the extension
picks the format (.npz, .h5, .safetensors).  A checkpoint that resumes *exactly* holds
everything that decides the next update: the weights, the optimizer's state (Adam's
moving averages and step count), the scheduler's position, the step, and the random
generator's state (this network uses dropout, so the masks after the restart must be the
ones the uninterrupted run drew).  Restored into fresh objects, training goes on bit for
bit as if it had never stopped; we also show what goes wrong when the generator is left
out.  Writes are atomic (temporary file + rename), so a crash while saving never destroys
the previous checkpoint.  (Step 39 is about the other use of a saved file: a trained
model's weights, reloaded and fine-tuned.)
Run: python steps/step36.py
"""
import os
import shutil
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.optim import lr_scheduler
from lezero.random import get_rng_state, set_rng_state

rng = np.random.default_rng(0)
x = rng.uniform(-2, 2, (64, 1)).astype(np.float32)
y = (np.sin(2 * x) + 0.05 * rng.standard_normal((64, 1))).astype(np.float32)


def new_run(seed):
    """Weights, an Adam optimizer and a step-decay schedule."""
    lz.manual_seed(seed)                         # LeZero's generator draws the dropout masks
    r = np.random.default_rng(seed)
    model = {"W1": lz.Parameter(r.standard_normal((1, 32)).astype(np.float32)),
             "b1": lz.Parameter(r.uniform(-2, 2, 32).astype(np.float32)),
             "W2": lz.Parameter((r.standard_normal((32, 1)) / 6).astype(np.float32))}
    opt = optim.Adam(list(model.values()), lr=0.02)
    sched = lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
    return model, opt, sched


def train(model, opt, sched, steps):
    for _ in range(steps):
        opt.zero_grad()
        hidden = F.tanh(F.matmul(lz.Variable(x), model["W1"]) + model["b1"])
        pred = F.matmul(F.dropout(hidden, 0.1, training=True), model["W2"])
        loss = F.sum((pred - y) ** 2) / len(x)
        loss.backward()
        opt.step()
        sched.step()
    return loss.item()


# One uninterrupted run of 300 steps.
model, opt, sched = new_run(seed=1)
loss = train(model, opt, sched, 300)
final = {name: p.data.copy() for name, p in model.items()}
print(f"uninterrupted: 300 steps, loss {loss:.5f}, lr {sched.get_last_lr()[0]:.4f}")

# The same run, stopped after 120 steps and saved in each format.
workdir = tempfile.mkdtemp()
model, opt, sched = new_run(seed=1)
train(model, opt, sched, 120)
checkpoint = {"model": model, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
              "step": 120, "rng": get_rng_state()}
for ext in ("npz", "h5", "safetensors"):
    path = os.path.join(workdir, f"run.{ext}")
    lz.save(checkpoint, path)
    print(f"saved {os.path.basename(path):16s} {os.path.getsize(path):6d} bytes")

# Resume from each file into fresh objects (built from a different seed on purpose).
for ext in ("npz", "h5", "safetensors"):
    ck = lz.load(os.path.join(workdir, f"run.{ext}"))
    fresh, opt2, sched2 = new_run(seed=99)
    for name, p in fresh.items():
        p.data[...] = ck["model"][name]
    opt2.load_state_dict(ck["optimizer"])
    sched2.load_state_dict(ck["scheduler"])
    set_rng_state(ck["rng"])
    resumed = train(fresh, opt2, sched2, 300 - ck["step"])
    same = all(np.array_equal(fresh[name].data, final[name]) for name in final)
    print(f"resumed from .{ext:12s} at step {ck['step']}: loss {resumed:.5f}, "
          f"weights bit-identical to the uninterrupted run: {same}")
    assert same

# The same resume without the generator's state: other dropout masks, other weights.
ck = lz.load(os.path.join(workdir, "run.npz"))
fresh, opt2, sched2 = new_run(seed=99)
for name, p in fresh.items():
    p.data[...] = ck["model"][name]
opt2.load_state_dict(ck["optimizer"])
sched2.load_state_dict(ck["scheduler"])
train(fresh, opt2, sched2, 300 - ck["step"])
drift = max(float(np.abs(fresh[name].data - final[name]).max()) for name in final)
print(f"resumed without the RNG state: weights differ by up to {drift:.2e}")
assert drift > 0

state = ck["optimizer"]["state"][0]
print("what Adam keeps per parameter:", sorted(state), "step =", state["step"])
shutil.rmtree(workdir)
