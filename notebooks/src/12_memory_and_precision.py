# %% [markdown]
# # 12. Memory and precision
#
# This notebook follows `steps/step45.py` to `steps/step47.py` and `steps/step64.py`.
# Training memory is mostly what the graph keeps for backward: every recorded Function
# holds what its backward reads (its inputs, or its output) until the gradient has passed.
# Two tools cut it, and a profiler measures the cut:
#
# * **mixed precision** (`lezero.amp`): keep float16 activations where float16 is safe;
# * **gradient checkpointing** (`lz.checkpoint`): keep only block boundaries and
#   recompute the inside of a block during backward;
# * **the memory profiler** (`lz.memory`): counts exactly what is saved, per buffer.
#
# The last section takes a real model, ResNet-18, and finds where its memory goes.

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

# %% [markdown]
# ## Where does a real model's memory go?
# This section follows `steps/step64.py`: ResNet-18 with the CIFAR stem, one training step
# on a batch of 16 images of 3x32x32. Start from what the process sees: NumPy reports every
# buffer it allocates to Python's `tracemalloc`, so the bytes traced once forward returns
# (minus those alive before) are what the step keeps for backward, and the traced peak is
# the step's peak. `measure_step` sets the gradients to None first, so every peak includes
# allocating them; the first call is a warm-up (compiled kernels, the autotuner's choices).

# %%
import contextlib
import gc
import io
import tracemalloc
import weakref

import lezero.runtime
from lezero.nn.models import resnet18

MiB = 2 ** 20
lz.manual_seed(0)
net = resnet18(num_classes=10, small_input=True)
rng = np.random.default_rng(0)
images = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
labels = rng.integers(0, 10, 16)


def net_loss(body=None):
    """The training loss; ``body`` replaces the residual stages layer1..layer4."""
    h = net.maxpool(net.relu(net.bn1(net.conv1(images))))
    h = body(h) if body else net.layer4(net.layer3(net.layer2(net.layer1(h))))
    return F.cross_entropy(net.fc(F.flatten(net.avgpool(h), 1)), labels)


def measure_step(forward, inspect=None, within=None):
    """(MiB traced once forward returns, MiB at the step's peak); ``inspect(loss)`` runs
    while the graph is alive, ``within`` (a profiler) spans the step inside the count."""
    net.zero_grad()
    gc.collect()
    tracemalloc.start()
    try:
        with within or contextlib.nullcontext():
            base = tracemalloc.get_traced_memory()[0]
            loss = forward()
            kept = tracemalloc.get_traced_memory()[0] - base
            if inspect:
                inspect(loss)
            loss.backward()
            peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return kept / MiB, peak / MiB


measure_step(net_loss)
steps = {"float32": measure_step(net_loss)}
print("kept after forward %.1f MiB, step peak %.1f MiB" % steps["float32"])

# %% [markdown]
# ### Who keeps it
# `lz.memory.profile(net)` sees every recorded Function and counts each buffer it keeps
# once: `print_saved()` lists them (dtype, shape, the operator and the module keeping it,
# and its role: an input, or an array the operator stored), `by_module()` gives each
# module's peak, `summary()` the peaks. Measured inside the same `tracemalloc` count, its
# activation figure (parameters excluded) is nearly all the process keeps; the rest are
# the logits, the loss and the graph's Python objects.

# %%
prof = lz.memory.profile(net)
traced, _ = measure_step(net_loss, lambda loss: prof.print_saved(limit=8), within=prof)
print(f"profiler {prof.peak_activation_bytes / MiB:.1f} MiB of activations, tracemalloc "
      f"{traced:.1f} MiB kept: ratio {prof.peak_activation_bytes / MiB / traced:.3f}")
print({k: f"{v / MiB:.1f} MiB" for k, v in prof.summary().items()})

# %%
stages = ["conv1", "bn1", "relu", "layer1", "layer2", "layer3", "layer4", "fc"]
per_module = prof.by_module()
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.bar(stages, [per_module.get(s, 0) / MiB for s in stages])
ax.set_ylabel("peak kept for backward (MiB)")
ax.set_title("ResNet-18, batch 16 of 32x32: what each stage keeps")
plt.show()

# %% [markdown]
# ### What each operator keeps, and why
# A `Function` keeps what its backward reads, no more. Its class says which inputs those
# are (`save_inputs`, a tuple of positions; `True`, the default, means all); an input it
# does not read is held as an `InputRef`: the graph edge, shape and dtype, no array.
#
# | operator | keeps | why |
# |---|---|---|
# | ReLU | its output | y > 0 exactly where x > 0, and the next operator keeps y anyway |
# | batch norm | its input and per-channel statistics | x-hat is recomputed from them in backward |
# | add | nothing | the gradient passes through unchanged |
# | dropout | a bool mask | backward needs only which elements were kept: 1 byte each |
# | convolution | its input; its transformed input only inside the budget | the weight gradient reads the input; the transform can be recomputed |
#
# `lz.memory.saved_residuals(fn)` shows it on a small batch (each operator's input is made
# by `v * 1.0`: an intermediate, as in a network; a leaf that requires grad counts as a
# parameter and is not listed).

# %%
v = lz.Variable(rng.standard_normal((8, 16, 12, 12)).astype(np.float32), requires_grad=True)
w = lz.Parameter(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1)
ones, zeros = np.ones(16, np.float32), np.zeros(16, np.float32)


def conv_without_transforms():
    with lz.memory.policy.using(transform_cache_bytes=0):
        return F.conv2d(v * 1.0, w, padding=1)


ops = {"relu": lambda: F.relu(v * 1.0),
       "batch_norm": lambda: F.batch_norm(v * 1.0, zeros, ones, lz.Parameter(ones),
                                          lz.Parameter(zeros), training=True),
       "add": lambda: v * 1.0 + v * 2.0,
       "dropout": lambda: F.dropout(v * 1.0, 0.5, training=True),
       "conv2d": lambda: F.conv2d(v * 1.0, w, padding=1),
       "conv2d, budget 0": conv_without_transforms}
for name, op in ops.items():
    rows = [r for r in lz.memory.saved_residuals(op) if r.op != "Mul"]
    print(f"{name:<16}", ", ".join(f"{r.role} {r.dtype}{list(r.shape)}" for r in rows)
          or "nothing")

# %% [markdown]
# On two lines: the intermediate `h` is read by ReLU only, whose backward does not read it,
# so once we drop our name for it nothing holds its array.

# %%
h = v * 2.0
y = F.relu(h)
gone = weakref.ref(h)
del h
print(type(y.creator).__name__, "save_inputs =", type(y.creator).save_inputs)
print("holds", y.creator.inputs[0], "- the intermediate is freed:", gone() is None)
v.cleargrad()
y.backward(grad=np.ones(y.shape, np.float32))
print("gradient still right:", np.array_equal(v.grad.data, 2.0 * (v.data > 0)))

# %% [markdown]
# ### The memory policy
# What trades memory for speed runs only inside a budget:
# `lz.memory.policy.transform_cache_bytes` (32 MiB by default) bounds the transforms all
# graphs in the process keep for backward; `lz.memory.kept_transforms()` says how much they
# hold now, and `lezero.runtime.show()` lists the entry with every other setting. At 0, a
# convolution recomputes its transform in backward.

# %%
listing = io.StringIO()
lezero.runtime.show(file=listing)
print("\n".join(line for line in listing.getvalue().splitlines() if "transform_cache" in line))
held = []
steps["float32"] = measure_step(net_loss, lambda loss: held.append(lz.memory.kept_transforms()))
with lz.memory.policy.using(transform_cache_bytes=0):
    steps["budget 0"] = measure_step(net_loss,
                                     lambda loss: held.append(lz.memory.kept_transforms()))
print(f"transforms kept while the graph lived: {held[0] / MiB:.1f} MiB by default, "
      f"{held[1] / MiB:.1f} MiB at budget 0")

# %% [markdown]
# ### Buying memory: mixed precision and checkpointing
# The same step under `amp.autocast("float16")`, and with the eight residual blocks run by
# `lz.checkpoint_sequential` in about sqrt(8) segments (only the segments' inputs are kept;
# backward recomputes the rest), each measured by `tracemalloc` as above. The step's peak
# comes in backward: it also holds the parameters' gradients and, when checkpointing, the
# segment being recomputed, so checkpointing lowers the peak least where the weights are
# large beside the activations.

# %%
with amp.autocast("float16"):
    steps["autocast float16"] = measure_step(net_loss)
segments = lz.checkpoint_sequential([*net.layer1, *net.layer2, *net.layer3, *net.layer4])
steps[f"checkpoint {segments.segments}"] = measure_step(lambda: net_loss(segments))
for name, (kept, peak) in steps.items():
    print(f"{name:<26} kept after forward {kept:6.1f} MiB, step peak {peak:6.1f} MiB")
print(f"the parameters' gradients: {sum(p.data.nbytes for p in net.parameters()) / MiB:.1f} MiB")

names = list(steps)
fig, ax = plt.subplots(figsize=(7, 3.5))
at = np.arange(len(names))
ax.bar(at - 0.2, [steps[n][0] for n in names], 0.4, label="kept after forward")
ax.bar(at + 0.2, [steps[n][1] for n in names], 0.4, label="step peak")
ax.set_xticks(at, names, rotation=15)
ax.set_ylabel("MiB (tracemalloc)")
ax.set_title("One ResNet-18 training step")
ax.set_ylim(0, 1.3 * max(peak for _, peak in steps.values()))
ax.legend(loc="upper center", ncol=2)
plt.show()
