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
from lezero import optim
from lezero.kernels.threads import SplitWhenFaster, threads
# %matplotlib inline

rng = np.random.default_rng(19)
SIZES, BATCH = [784, 512, 512, 10], 64
x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
t = rng.integers(0, SIZES[-1], BATCH)
params = []
for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
    params += [lz.Parameter(rng.uniform(-1, 1, (n_out, n_in)).astype(np.float32) / n_in ** 0.5),
               lz.Parameter(np.zeros(n_out, np.float32))]
opt = optim.SGD(params, lr=0.05)


def loss_fn():
    h = x
    for i in range(0, len(params), 2):
        h = F.linear(h, params[i], params[i + 1])
        if i + 2 < len(params):
            h = F.relu(h)
    return F.cross_entropy(h, t)


def step():
    loss = loss_fn()
    opt.zero_grad()
    loss.backward()
    opt.step()


weights = [p.data for p in params[0::2]]


def gemms_alone():
    acts = [x]
    for w in weights:
        acts.append(acts[-1] @ w.T)
    g = np.ones_like(acts[-1])
    for i in reversed(range(len(weights))):
        g.T @ acts[i]
        if i:
            g = g @ weights[i]

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
def rounds(fns, n_rounds=12, block=3):
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for r in range(n_rounds):
        for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            best = float("inf")
            for _ in range(block):
                start = time.perf_counter(); fns[i](); best = min(best, time.perf_counter() - start)
            times[i].append(best)
    return np.array(times)


times = rounds([step, gemms_alone])
ratios = times[0] / times[1]
print(f"step / GEMMs alone: median {np.median(ratios):.2f}, rounds {ratios.min():.2f}-{ratios.max():.2f}")
plt.figure(figsize=(7, 3))
plt.plot(times[0] * 1e3, "o-", label="step"); plt.plot(times[1] * 1e3, "o-", label="GEMMs alone")
plt.ylabel("ms (best of a block)"); plt.xlabel("round"); plt.legend(); plt.show()

# %% [markdown]
# ## Where the rest goes
# `cProfile` gives each function's own time. For an MLP nearly all of it is inside the
# matrix products (`kernels/blas.py`); the optimizer's update (`_axpby`) comes next.

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
loss = loss_fn()
loss.backward()
print("the gradient has no creator:", params[0].grad.creator is None)

# %% [markdown]
# The optimizer's update is a pass over memory. Whether splitting it over two threads pays
# depends on the state of the machine's memory at that moment (on the development VM, a
# slow spell made one thread 7x slower and two threads only 3x), so the update keeps its
# recent timings each way and runs the faster, trying the other way now and then. The same
# chooser on a NumPy add of 2M numbers:

# %%
runner = SplitWhenFaster(min_part=1 << 18)
y, g = np.zeros(1 << 21, np.float32), np.ones(1 << 21, np.float32)
for _ in range(40):
    runner.run(lambda a, b: np.add(a, b, out=a), y, g)
one, two = runner.cost(False), runner.cost(True)
if two is None:
    print(f"{threads()} thread(s) for kernels here: every call runs whole")
else:
    print(f"one call {one * 1e9:.2f} ns per element, split {two * 1e9:.2f} ns: "
          f"it runs {'split' if two < one else 'as one call'}")
print("every element updated 40 times:", bool((y == 40).all()))
