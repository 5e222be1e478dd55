# %% [markdown]
# # 19. Where a training step's time goes
#
# This notebook follows `steps/step62.py`. A speed figure is worth something only if it
# holds when measured again, and on a shared machine it often does not: the machine's
# speed drifts within seconds. Here we measure an MLP training step the way
# `benchmarks/bench_workloads.py` measures LeZero against PyTorch (warm alternating
# rounds), compare it with its floor (the GEMMs alone), and look at where the rest goes.
# `docs/performance.md` holds the measured tables for the six workloads of the speed
# issue.

# %%
import cProfile
import pstats
import time

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero.runtime import SplitWhenFaster, threads
# %matplotlib inline

_ = lz.manual_seed(19)
rng = np.random.default_rng(19)
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10))
opt = optim.SGD(model.parameters(), lr=0.05)
x = rng.standard_normal((64, 784)).astype(np.float32)
t = rng.integers(0, 10, 64)


def step():
    loss = F.cross_entropy(model(x), t)
    opt.zero_grad()
    loss.backward()
    opt.step()


# The floor: the same matrix products in NumPy, forward then backward (no gradient for
# the input x, so the first layer's input product is skipped, as the framework does).
mats = [m.weight.data for m in model if isinstance(m, nn.Linear)]


def gemms_alone():
    outs = [x]
    for w in mats:
        outs.append(outs[-1] @ w.T)
    grad = np.ones_like(outs[-1])
    for layer in range(len(mats) - 1, -1, -1):
        grad.T @ outs[layer]
        grad = grad @ mats[layer] if layer else grad

# %% [markdown]
# ## Naive timing moves with the machine
# The first call pays for compiling the Numba kernels and allocating: never time it.

# %%
start = time.perf_counter(); step(); first = time.perf_counter() - start
start = time.perf_counter(); step(); second = time.perf_counter() - start
print(f"first step {first * 1e3:.1f} ms, second {second * 1e3:.2f} ms")
for _ in range(5):
    gemms_alone()

# %% [markdown]
# Even warm, timing all of one side and then all of the other can compare two machines:
# the one of this second and the one of the next. In a quiet minute the two series below
# are flat; in a busy one they jump, and a ratio of two such series means little. Each
# point is one call.

# %%
naive_step = [0.0] * 60
naive_gemm = [0.0] * 60
for i in range(60):
    start = time.perf_counter(); step(); naive_step[i] = time.perf_counter() - start
for i in range(60):
    start = time.perf_counter(); gemms_alone(); naive_gemm[i] = time.perf_counter() - start
plt.figure(figsize=(7, 3))
plt.plot(np.array(naive_step) * 1e3, ".", label="step, first 60 calls")
plt.plot(np.array(naive_gemm) * 1e3, ".", label="GEMMs alone, next 60 calls")
plt.ylabel("ms"); plt.xlabel("call"); plt.legend(); plt.title("one step at a time")
plt.show()

# %% [markdown]
# ## Rounds
# A round runs a short block of warm calls of each side (the block's fastest call
# counts), the order alternating from round to round; the ratio is taken per round, so a
# slow spell slows both sides of that round, and the median of the ratios is the figure.

# %%
def best_of(fn, block=3):
    best = float("inf")
    for _ in range(block):
        start = time.perf_counter(); fn(); best = min(best, time.perf_counter() - start)
    return best


contenders = {"step": step, "GEMMs alone": gemms_alone}
per_round = {name: [] for name in contenders}
for r in range(12):
    names = list(contenders) if r % 2 == 0 else list(contenders)[::-1]   # alternate
    for name in names:
        per_round[name].append(best_of(contenders[name]))
times = np.array([per_round["step"], per_round["GEMMs alone"]])
ratios = times[0] / times[1]
print(f"step / GEMMs alone: median {np.median(ratios):.2f}, rounds {ratios.min():.2f}-{ratios.max():.2f}")
plt.figure(figsize=(7, 3))
plt.plot(times[0] * 1e3, "o-", label="step"); plt.plot(times[1] * 1e3, "o-", label="GEMMs alone")
plt.ylabel("ms (best of a block)"); plt.xlabel("round"); plt.legend(); plt.show()

# %% [markdown]
# ## Where the rest goes
# `cProfile` gives each function's own time. For an MLP nearly all of it is inside the
# matrix products (`runtime/blas.py`); the optimizer's update (`_axpby`) comes next.

# %%
profiler = cProfile.Profile()
profiler.enable()
for _ in range(20):
    step()
profiler.disable()
stats = pstats.Stats(profiler).stats
total = sum(v[2] for v in stats.values())
top = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:6]
names = [f"{name}\n({path.split('lezero/')[-1].split('/')[-1]})" for (path, _, name), _ in top]
shares = [v[2] / total for _, v in top]
plt.figure(figsize=(8, 3))
plt.bar(range(len(shares)), shares); plt.xticks(range(len(shares)), names, fontsize=7)
plt.ylabel("share of own time"); plt.show()

# %% [markdown]
# `lz.TimerHook` sums the time per operator, forward and backward:

# %%
with lz.TimerHook() as timer:
    for _ in range(5):
        step()
timer.print_report()

# %% [markdown]
# ## Two fast paths
# With `create_graph` off (the default), a backward computes gradients as plain arrays:
# nothing is recorded for them, so a training step builds one graph, not two.

# %%
loss = F.cross_entropy(model(x), t)
loss.backward()
print("the gradient has no creator:", model[0].weight.grad.creator is None)

# %% [markdown]
# The optimizer's update is a pass over memory. Whether splitting it over two threads pays
# depends on the state of the machine's memory at that moment (on the development VM, a
# slow spell made one thread 7x slower and two threads only 3x), so the update keeps its
# recent timings each way and runs the faster, trying the other way now and then. The same
# chooser on a NumPy add of 2M numbers:

# %%
runner = SplitWhenFaster(min_part=1 << 18, explore=8)
y, g = np.zeros(1 << 21, np.float32), np.ones(1 << 21, np.float32)
call_ms, was_split = [], []
for _ in range(48):
    before = list(runner.timings[True])
    start = time.perf_counter()
    runner.run(lambda a, b: np.add(a, b, out=a), y, g)
    call_ms.append((time.perf_counter() - start) * 1e3)
    was_split.append(list(runner.timings[True]) != before)     # its split timings moved
print(f"{threads()} thread(s) for kernels; {sum(was_split)} of 48 calls ran split; "
      f"every element updated 48 times: {bool((y == 48).all())}")
calls = np.arange(48)
plt.figure(figsize=(7, 3))
plt.plot(calls[~np.array(was_split)], np.array(call_ms)[~np.array(was_split)], "o", label="one call")
plt.plot(calls[np.array(was_split)], np.array(call_ms)[np.array(was_split)], "s", label="split")
plt.yscale("log")     # the first calls are cold (page faults, worker threads starting)
plt.xlabel("call"); plt.ylabel("ms (log scale)"); plt.legend(); plt.title("add of 2M numbers")
plt.show()
