# %% [markdown]
# # 8. Optimizers, schedules and checkpoints
#
# This notebook follows `steps/step35.py` and `steps/step36.py`. `lezero.optim` holds
# PyTorch's optimizers with PyTorch's arguments, defaults and update rules: an optimizer
# owns `param_groups` (dicts of hyperparameters that a scheduler or you may edit) and
# `state` (per-parameter buffers), and `zero_grad()` / `step()` is the whole training loop.
# `lz.save` / `lz.load` write and read checkpoints (.npz, HDF5, safetensors) and read
# PyTorch `.pt` files without running code from them.

# %%
import os
import pickle
import tempfile
import zipfile

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.optim import lr_scheduler
# %matplotlib inline

# %% [markdown]
# ## Racing down the Rosenbrock valley
# $f(x, y) = (1 - x)^2 + 100 (y - x^2)^2$ has its minimum at $(1, 1)$, at the bottom of a
# curved valley with steep walls and an almost flat floor. Plain gradient descent needs a
# small rate (the walls) and then crawls (the floor). Momentum accumulates speed along the
# floor; RMSprop and Adam divide each coordinate by its recent gradient size, so the flat
# direction gets a large step; Lion moves every coordinate by exactly `lr` (the sign of a
# momentum), which makes it fast but leaves it hopping around the minimum.

# %%
def rosenbrock(p):
    x, y = p[0], p[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def race(make_optimizer, steps=1500, start=(-1.5, 2.0)):
    p = lz.Parameter(np.array(start))
    opt = make_optimizer([p])
    path, losses = [p.data.copy()], []
    for _ in range(steps):
        opt.zero_grad()
        loss = rosenbrock(p)
        loss.backward()
        opt.step()
        path.append(p.data.copy())
        losses.append(loss.item())
    return np.array(path), np.array(losses)


contenders = {
    "SGD lr=1e-3": lambda ps: optim.SGD(ps, lr=1e-3),
    "SGD momentum=0.9": lambda ps: optim.SGD(ps, lr=1e-3, momentum=0.9),
    "SGD Nesterov": lambda ps: optim.SGD(ps, lr=1e-3, momentum=0.9, nesterov=True),
    "RMSprop lr=1e-2": lambda ps: optim.RMSprop(ps, lr=1e-2),
    "Adam lr=0.05": lambda ps: optim.Adam(ps, lr=0.05),
    "Lion lr=3e-3": lambda ps: optim.Lion(ps, lr=3e-3),
}
runs = {name: race(make) for name, make in contenders.items()}

xs, ys = np.meshgrid(np.linspace(-2, 2, 300), np.linspace(-1, 3, 300))
zs = (1 - xs) ** 2 + 100 * (ys - xs ** 2) ** 2
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(14, 5.5))
ax0.contour(xs, ys, np.log10(zs + 1e-3), levels=25, cmap="Greys", linewidths=0.6)
for name, (path, _) in runs.items():
    ax0.plot(path[:, 0], path[:, 1], lw=1.3, label=name)
ax0.plot(-1.5, 2.0, "ko")
ax0.plot(1, 1, "r*", ms=14)
ax0.set_title("paths from (-1.5, 2), 1500 steps")
ax0.set_xlim(-2, 2); ax0.set_ylim(-1, 3); ax0.legend(fontsize=8)
for name, (_, losses) in runs.items():
    ax1.semilogy(losses, label=name)
ax1.set_xlabel("step"); ax1.set_ylabel("f"); ax1.set_title("loss")
ax1.grid(alpha=0.3); ax1.legend(fontsize=8)
plt.show()
for name, (path, losses) in runs.items():
    print(f"{name:17s} end ({path[-1, 0]: .4f}, {path[-1, 1]: .4f})  f = {losses[-1]:.2e}")

# %% [markdown]
# ## The same updates as PyTorch
# Every optimizer follows `torch.optim`'s update order (where weight decay enters, where
# `eps` is added, how the bias corrections are applied), so ten steps from the same weights
# and gradients agree to rounding. The test suite checks every optimizer and option this
# way; here is one pass, in float64. (Lion is not in PyTorch: it is checked against the
# paper's algorithm.)

# %%
try:
    import torch
except ImportError:
    torch = None
    print("torch is not installed: skipping the comparison")

if torch is not None:
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 3))
    grads = rng.standard_normal((10, 4, 3))
    settings = {"SGD": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                "Adam": dict(lr=0.01, amsgrad=True), "AdamW": dict(lr=0.01),
                "RMSprop": dict(lr=0.01, centered=True, momentum=0.5),
                "Adagrad": dict(lr=0.1), "Adadelta": dict(), "Adamax": dict(),
                "NAdam": dict(weight_decay=0.1)}
    for name, kw in settings.items():
        p, tp = lz.Parameter(w0.copy()), torch.nn.Parameter(torch.tensor(w0))
        opt, topt = getattr(optim, name)([p], **kw), getattr(torch.optim, name)([tp], **kw)
        for g in grads:
            p.grad, tp.grad = lz.Variable(g.copy()), torch.tensor(g)
            opt.step(); topt.step()
        diff = np.abs(p.data - tp.detach().numpy()).max()
        print(f"{name:9s} moved {np.abs(p.data - w0).max():.3e}, max |LeZero - PyTorch| = {diff:.1e}")
    torch.set_default_dtype(torch.float32)

# %% [markdown]
# ## Learning-rate schedules
# A scheduler edits `optimizer.param_groups[i]['lr']` once per `step()`. Most are written in
# PyTorch's chainable form (`lr <- lr * gamma`), so they compose and their sequences equal
# PyTorch's. `OneCycleLR` also moves momentum (or Adam's beta1) the opposite way, and
# `ReduceLROnPlateau` reacts to a metric instead of the epoch count.

# %%
def schedule(make, epochs=60, metric=None):
    p = lz.Parameter(np.zeros(1))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    sched = make(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for e in range(epochs):
        opt.step()
        sched.step() if metric is None else sched.step(metric[e])
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


plateau_metric = np.concatenate([np.linspace(1, 0.4, 15), np.full(45, 0.4)])
schedules = {
    "StepLR(20, 0.5)": lambda o: lr_scheduler.StepLR(o, step_size=20, gamma=0.5),
    "MultiStepLR([10, 30])": lambda o: lr_scheduler.MultiStepLR(o, [10, 30], gamma=0.3),
    "ExponentialLR(0.95)": lambda o: lr_scheduler.ExponentialLR(o, gamma=0.95),
    "CosineAnnealingLR(20)": lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=20),
    "OneCycleLR": lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.3, total_steps=60),
    "LinearLR -> Cosine": lambda o: lr_scheduler.SequentialLR(
        o, [lr_scheduler.LinearLR(o, start_factor=0.05, total_iters=10),
            lr_scheduler.CosineAnnealingLR(o, T_max=50)], milestones=[10]),
}
fig, axes = plt.subplots(1, 2, figsize=(14, 4))
for name, make in schedules.items():
    axes[0].plot(schedule(make), label=name)
axes[0].set_xlabel("epoch"); axes[0].set_ylabel("lr"); axes[0].legend(fontsize=8)
axes[0].grid(alpha=0.3); axes[0].set_title("epoch-driven schedules")
axes[1].plot(schedule(lambda o: lr_scheduler.ReduceLROnPlateau(o, patience=5, factor=0.5),
                      metric=plateau_metric), label="lr")
axes[1].plot(plateau_metric / 10, "--", label="metric / 10")
axes[1].set_xlabel("epoch"); axes[1].legend(); axes[1].grid(alpha=0.3)
axes[1].set_title("ReduceLROnPlateau(patience=5, factor=0.5)")
plt.show()

# %% [markdown]
# ## Gradient clipping
# `clip_grad_norm_` rescales all gradients together so their joint norm is at most
# `max_norm` and returns the norm before clipping; `clip_grad_value_` clamps each entry.
# Both work in place on `p.grad`.

# %%
a, b = lz.Parameter(np.zeros(2)), lz.Parameter(np.zeros(1))
a.grad, b.grad = lz.Variable(np.array([3.0, 4.0])), lz.Variable(np.array([12.0]))
total = optim.clip_grad_norm_([a, b], max_norm=1.0)
print("norm before:", total.item(), " after:",
      np.sqrt((a.grad.data ** 2).sum() + (b.grad.data ** 2).sum()).round(6))
print("clipped gradients:", a.grad.data.round(4), b.grad.data.round(4))

# %% [markdown]
# ## Checkpoints and exact resumption
# A checkpoint holds the weights and everything that decides the next update: the
# optimizer's `state_dict()` (Adam's moving averages and step counts, numbered like
# PyTorch's), the scheduler's position, the epoch. The extension picks the format. Loading
# into *fresh* objects and continuing reproduces the uninterrupted run bit for bit.

# %%
rng = np.random.default_rng(0)
x = rng.uniform(-2, 2, (64, 1)).astype(np.float32)
y = (np.sin(2 * x) + 0.05 * rng.standard_normal((64, 1))).astype(np.float32)


def new_run(seed):
    r = np.random.default_rng(seed)
    model = {"W1": lz.Parameter(r.standard_normal((1, 32)).astype(np.float32)),
             "b1": lz.Parameter(r.uniform(-2, 2, 32).astype(np.float32)),
             "W2": lz.Parameter((r.standard_normal((32, 1)) / 6).astype(np.float32))}
    opt = optim.Adam(list(model.values()), lr=0.02)
    return model, opt, lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)


def train(model, opt, sched, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        h = F.tanh(F.matmul(lz.Variable(x), model["W1"]) + model["b1"])
        loss = F.sum((F.matmul(h, model["W2"]) - y) ** 2) / len(x)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


model, opt, sched = new_run(1)
full = train(model, opt, sched, 300)

workdir = tempfile.mkdtemp()
model, opt, sched = new_run(1)
first = train(model, opt, sched, 120)
checkpoint = {"model": model, "optimizer": opt.state_dict(),
              "scheduler": sched.state_dict(), "step": 120}
for ext in ("npz", "h5", "safetensors"):
    lz.save(checkpoint, os.path.join(workdir, "run." + ext))
    print(f"run.{ext:12s} {os.path.getsize(os.path.join(workdir, 'run.' + ext)):6d} bytes")

ck = lz.load(os.path.join(workdir, "run.safetensors"))
fresh, opt2, sched2 = new_run(seed=123)                    # other weights: all get replaced
for name, p in fresh.items():
    p.data[...] = ck["model"][name]
opt2.load_state_dict(ck["optimizer"])
sched2.load_state_dict(ck["scheduler"])
rest = train(fresh, opt2, sched2, 300 - ck["step"])
print("resumed losses identical to the uninterrupted run:", rest == full[120:])

plt.figure(figsize=(7, 3.5))
plt.semilogy(full, lw=3, alpha=0.4, label="uninterrupted")
plt.semilogy(range(120, 300), rest, "--", label="resumed from step 120")
plt.axvline(120, color="k", lw=0.8)
plt.xlabel("step"); plt.ylabel("loss"); plt.legend(); plt.grid(alpha=0.3)
plt.show()
print("optimizer state_dict:", {k: (sorted(v) if k == "state" else len(v))
                                 for k, v in ck["optimizer"].items()})
print("parameter 0 state:", {k: getattr(v, "shape", v) for k, v in ck["optimizer"]["state"][0].items()})

# %% [markdown]
# Saves are atomic: the data goes to a temporary file in the same directory, is flushed
# with `fsync` and then renamed over the target, so a crash mid-save leaves the old
# checkpoint intact. Here a "crash" is simulated by an object that cannot be saved:
# it is detected before the disk is touched.

# %%
path = os.path.join(workdir, "run.npz")
try:
    lz.save({"model": model, "callback": print}, path)
except TypeError as e:
    print("TypeError:", e)
print("the old checkpoint still loads, step", lz.load(path)["step"])

# %% [markdown]
# ## PyTorch weights, without PyTorch and without its code
# A `.pt` file is a zip archive holding a pickle and raw storages. A pickle can import and
# call anything (that is how a malicious file runs `os.system`), so `lz.load` unpickles with
# an allow-list: tensors, `OrderedDict`, plain containers and numbers. Tensors come back as
# NumPy arrays (views into shared storages, as in PyTorch), and a state_dict as a dict.

# %%
if torch is not None:
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                              torch.nn.Linear(4, 2))
    net(torch.randn(8, 3))
    torch.save(net.state_dict(), os.path.join(workdir, "net.pt"))
    sd = lz.load(os.path.join(workdir, "net.pt"))
    for k, v in sd.items():
        same = np.array_equal(v, net.state_dict()[k].numpy())
        print(f"{k:22s} {str(v.dtype):8s} {str(v.shape):8s} equal to torch: {same}")


class Exploit:
    def __reduce__(self):
        return os.system, ("echo this would have run",)


evil = os.path.join(workdir, "evil.pt")
with zipfile.ZipFile(evil, "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"weight": Exploit()}, protocol=2))
    z.writestr("archive/byteorder", "little")
try:
    lz.load(evil)
except pickle.UnpicklingError as e:
    print(type(e).__name__ + ":", str(e).split(": ", 1)[1][:80], "...")

# %%
import shutil
shutil.rmtree(workdir)
