"""Step 62: where a training step's time goes, measured so that the figure holds.

* A shared machine changes speed within seconds, so two timings taken one after the other
  compare two machines.  Time in **rounds** instead: a short block of warm steps of each
  contender (its fastest step counts), the order alternating, and take the median of the
  per-round ratios.
* The **floor** of a step written on NumPy is its GEMMs alone on the same shapes: no
  framework on NumPy beats it.  An MLP's step sits near it; the rest is overhead.
* ``cProfile`` says which functions own the time; ``lz.TimerHook`` sums it per operator.
* Two fast paths: a first-order backward records no graph for the gradients, and the
  optimizer's update runs on one thread or split over two, whichever its own recent
  timings say is faster (``lezero.runtime.SplitWhenFaster``).
Run: python steps/step62.py
"""
import cProfile
import pstats
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.runtime import SplitWhenFaster, threads

rng = np.random.default_rng(0)
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
    """The step's GEMMs in NumPy: 3 forward, 3 weight gradients, 2 input gradients."""
    acts = [x]
    for w in weights:
        acts.append(acts[-1] @ w.T)
    g = np.ones_like(acts[-1])
    for i in reversed(range(len(weights))):
        g.T @ acts[i]
        if i:
            g = g @ weights[i]


def rounds(fns, n_rounds=8, block=3):
    """Seconds per call of each function: per round, the best of a block, order alternating."""
    for fn in fns:
        fn()                                  # warm: compile, allocate, fill caches
    times = [[] for _ in fns]
    for r in range(n_rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            best = float("inf")
            for _ in range(block):
                start = time.perf_counter()
                fns[i]()
                best = min(best, time.perf_counter() - start)
            times[i].append(best)
    return np.array(times)


times = rounds([step, gemms_alone])
ratio = np.median(times[0] / times[1])
print(f"step {np.median(times[0]) * 1e3:.2f} ms, its GEMMs alone "
      f"{np.median(times[1]) * 1e3:.2f} ms: the step takes {ratio:.2f}x its floor")
print("per-round step times (ms):", np.round(times[0] * 1e3, 2))

profiler = cProfile.Profile()
profiler.enable()
for _ in range(10):
    step()
profiler.disable()
stats = pstats.Stats(profiler).stats
total = sum(v[2] for v in stats.values())          # own time of every function
top = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:4]
print("own time, largest first:")
for (path, line, name), v in top:
    print(f"  {v[2] / total:5.1%}  {name} ({path.split('lezero/')[-1]}:{line})")

with lz.TimerHook() as timer:
    for _ in range(5):
        step()
print("per operator (5 steps):")
timer.print_report()

loss = loss_fn()
loss.backward()
print("first-order gradients record no graph:", params[0].grad.creator is None)

# The optimizer's update is a pass over memory.  Whether two threads beat one depends on
# the machine's state of the moment, so the update measures both ways and runs the faster
# (each part needs 256k elements: the MLP above is too small to split).  The same chooser
# on a NumPy add of 2M numbers, which releases the GIL:
runner = SplitWhenFaster(min_part=1 << 18)
y, g = np.zeros(1 << 21, np.float32), np.ones(1 << 21, np.float32)
for _ in range(40):
    runner.run(lambda a, b: np.add(a, b, out=a), y, g)
one, two = runner.cost(False), runner.cost(True)
if two is None:
    print(f"{threads()} thread(s) for kernels here: the update runs as one call")
else:
    print(f"add of 2M numbers: one call {one * 1e9:.2f} ns per element, split "
          f"{two * 1e9:.2f} ns: it runs {'split' if two < one else 'as one call'}")
print("every element updated 40 times:", bool((y == 40).all()))
