# %% [markdown]
# # 12. Memory and precision
#
# This notebook follows `steps/step45.py` to `steps/step47.py`. Training memory is mostly
# what the graph keeps for backward: every recorded Function holds its inputs until the
# gradient has passed. Two tools cut it, and a profiler measures the cut:
#
# * **mixed precision** (`lezero.amp`): keep float16 activations where float16 is safe;
# * **gradient checkpointing** (`lz.checkpoint`): keep only block boundaries and
#   recompute the inside of a block during backward;
# * **the memory profiler** (`lz.memory`): counts exactly what is saved, per buffer.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
from lezero import amp, nn, optim
from lezero.data.datasets import Digits
from lezero.nn.models import LeNet5
# %matplotlib inline

import numba
from threadpoolctl import threadpool_limits
threadpool_limits(1)
numba.set_num_threads(1)

# %% [markdown]
# ## The cast policy
# Autocast decides per operator type. Products (matmul, linear, conv) go to float16;
# softmax, losses, exp/log and reductions to float32; binary operations take the wider
# of their inputs; normalizations compute in float32 but keep the activation's dtype.

# %%
print(amp.cast_policy)

# %% [markdown]
# ## Memory against depth
# A deep MLP (Linear + ReLU layers of width 256, batch 64). We measure the peak of what
# the graph saves for backward, parameters excluded, in four configurations. Plain
# float32 grows linearly with depth; float16 halves it; `checkpoint_sequential` with
# sqrt(depth) segments makes it grow as sqrt(depth); both together multiply.

# %%
def deep_mlp(depth, width=256):
    lz.manual_seed(0)
    one = nn.Linear(width, width)          # shared: activations do not depend on weights
    return [m for _ in range(depth) for m in (one, nn.ReLU())]


def peak(depth, mixed, checkpointed, width=256, batch=64):
    layers = deep_mlp(depth, width)
    x = lz.Variable(np.ones((batch, width), np.float32), requires_grad=False)
    seq = lz.checkpoint_sequential(layers, "sqrt") if checkpointed else None

    def run(v):
        if seq is not None:
            return seq(v)
        for m in layers:
            v = m(v)
        return v
    with lz.memory.profile(live=False) as prof:
        with amp.autocast(enabled=mixed):
            loss = run(x).mean()
        loss.backward()
    return prof.peak_activation_bytes


depths = [4, 16, 64]
series = {name: [peak(d, mixed, ckpt) for d in depths]
          for name, mixed, ckpt in [("float32", False, False), ("float16", True, False),
                                    ("float32 + checkpoint", False, True),
                                    ("float16 + checkpoint", True, True)]}
one = 64 * 256 * 4
for name, values in series.items():
    print(f"{name:<22}", "  ".join(f"{v / one:6.1f}" for v in values),
          "activations (float32 units) at depths", depths)

# %%
fig, ax = plt.subplots(figsize=(6, 4))
for name, values in series.items():
    ax.plot(depths, [v / 2 ** 20 for v in values], marker="o", label=name)
ax.plot(depths, [series["float32 + checkpoint"][0] / 2 ** 20 * np.sqrt(d / depths[0])
                 for d in depths], "k:", label="sqrt(depth)")
ax.set_xscale("log", base=2)
ax.set_yscale("log", base=2)
ax.set_xlabel("depth (layers)")
ax.set_ylabel("peak saved activations (MiB)")
ax.set_title("Memory kept for backward against depth")
ax.legend()
plt.show()

# %% [markdown]
# ## What exactly is saved
# `print_saved_residuals` lists each buffer once: its dtype and shape, the Function that
# keeps it and why (an input, or an array it stored). Under autocast the linear layers
# keep float16 inputs; the loss works in float32.

# %%
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
x = lz.Variable(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32),
                requires_grad=False)
t = np.arange(8) % 4
with amp.autocast():
    lz.memory.print_saved_residuals(lambda v: F.cross_entropy(model(v), t), x)

# %% [markdown]
# ## Loss scaling
# Mixed precision needs a loss scale: small gradients flush to zero in float16.
# `precision_report` shows, per parameter, the share of gradient elements float16 would
# lose at a given scale, and per operator type what autocast chose.

# %%
loss_fn = lambda: F.cross_entropy(model(x), t) * np.float32(1e-4)
for scale in (1.0, 2.0 ** 16):
    rep = amp.precision_report(loss_fn, model=model, scale=scale)
    print(f"scale {scale:>8g}:", {k: f"{v['underflow']:.0%}" for k, v in rep.params.items()})
print(rep)

# %% [markdown]
# ## Mixed precision trains as well
# LeNet-5 on the digits, float32 against autocast + GradScaler, from the same seed.

# %%
train, test = Digits(train=True), Digits(train=False)
xs, ts, xt, tt = train.data[:, None], train.targets, test.data[:, None], test.targets


def fit(mixed, epochs=6):
    lz.manual_seed(0)
    net = LeNet5(10, 1, 8)
    opt = optim.Adam(net.parameters(), lr=5e-3)
    scaler = amp.GradScaler(enabled=mixed)
    rng, curve = np.random.default_rng(0), []
    for _ in range(epochs):
        perm = rng.permutation(len(xs))
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            with amp.autocast(enabled=mixed):
                loss = F.cross_entropy(net(xs[idx]), ts[idx])
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            curve.append(loss.item())
    net.eval()
    with lz.no_grad():
        acc = float((net(xt).data.argmax(axis=1) == tt).mean())
    return curve, acc


(c32, a32), (c16, a16) = fit(False), fit(True)
plt.figure(figsize=(6, 3.5))
plt.plot(np.convolve(c32, np.ones(10) / 10, "valid"), label=f"float32 (test {a32:.1%})")
plt.plot(np.convolve(c16, np.ones(10) / 10, "valid"), label=f"mixed (test {a16:.1%})")
plt.xlabel("step")
plt.ylabel("training loss (moving average)")
plt.legend()
plt.show()
