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

# %% [markdown]
# ## Real-size speed: fusion, the convolution choice, INT8
# The MLP above is all GEMMs. Convolution networks run for inference depend on three more
# things, which `steps/step67.py` walks through on a ResNet-10 and an inverted-residual
# block; here the same questions on a narrow MobileNetV2 and a ResNet-18 of width 8, with
# the step's helpers and the benchmarks' `round_ratios` (the rounds above) imported.
#
# **Inference fusion.** Under `eval()` and `lz.no_grad()` each conv + batch norm (+ ReLU6)
# runs as one convolution with the norm folded into its weights. `TimerHook` counts the
# operators each way; `inference_fusion.disabled()` gives the unfused run to compare.

# %%
import os
import sys

ROOT = os.path.abspath("..") if os.path.basename(os.getcwd()) == "notebooks" else os.getcwd()
sys.path[:0] = [os.path.join(ROOT, "steps"), os.path.join(ROOT, "benchmarks")]
from _common import round_ratios  # noqa: E402
from step67 import inference, on_one_thread, operator_calls, quantized, settled  # noqa: E402
from lezero.kernels import int8_gemm  # noqa: E402
from lezero.nn import inference_fusion  # noqa: E402
from lezero.nn.models import MobileNetV2, resnet18  # noqa: E402

mobile = settled(MobileNetV2(num_classes=10, width_mult=0.35, small_input=True))
images = rng.standard_normal((4, 3, 32, 32)).astype(np.float32)
with lz.no_grad():
    out_fused = mobile(images).data
    with inference_fusion.disabled():
        out_plain = mobile(images).data
print(f"max |fused - unfused| = {np.abs(out_fused - out_plain).max():.1e} "
      f"(outputs up to {np.abs(out_plain).max():.2f})")
calls = {"unfused": operator_calls(inference(mobile, images, fused=False)),
         "fused": operator_calls(inference(mobile, images))}
ops = sorted(set(calls["unfused"]) | set(calls["fused"]),
             key=lambda k: -calls["unfused"].get(k, 0))
plt.figure(figsize=(8, 3))
for shift, (label, counts) in zip((-0.2, 0.2), calls.items()):
    plt.bar(np.arange(len(ops)) + shift, [counts.get(k, 0) for k in ops], 0.4, label=label)
plt.xticks(range(len(ops)), ops, fontsize=8); plt.ylabel("calls per forward"); plt.legend()
plt.title("MobileNetV2 x0.35, batch 4: operators run"); plt.show()
ratios, seconds = round_ratios(
    [inference(mobile, images), inference(mobile, images, fused=False)], rounds=7)
print(f"fused / unfused time, median of 7 rounds: {ratios[0]:.2f} "
      f"({seconds[0] * 1e3:.1f} ms against {seconds[1] * 1e3:.1f} ms)")

# %% [markdown]
# **The convolution's algorithm.** `F.conv_explain` prints the cost model's prediction
# beside a measurement for every algorithm and says which one `algo="auto"` runs; a 1x1
# kernel is one GEMM on the input itself ("direct"), a depthwise layer has its own kernel.
# One shape in full, then the chosen algorithm for a few of MobileNet's. The prediction
# ranks; where a measurement disagrees, `lz.Config.conv_autotune = True` measures once per
# shape and keeps the winner.

# %%
explained = F.conv_explain((4, 56, 16, 16), (56, 56, 3, 3), padding=1, repeat=2)
ran = [r for r in explained.rows if not r["unsupported"]]
rows_at = np.arange(len(ran))
plt.figure(figsize=(6, 2.5))
plt.barh(rows_at - 0.2, [r["predicted_ms"] for r in ran], 0.4, label="predicted")
plt.barh(rows_at + 0.2, [r["measured_ms"] for r in ran], 0.4, label="measured")
plt.yticks(rows_at, [r["algo"] for r in ran]); plt.xscale("log"); plt.xlabel("ms")
plt.title("3x3, 56 channels, 16x16, batch 4: forward"); plt.legend(); plt.show()
for label, xs, ws, kw in [("1x1 expand 16->96 @32", (4, 16, 32, 32), (96, 16, 1, 1), {}),
                          ("depthwise s2 96 @32", (4, 96, 32, 32), (96, 1, 3, 3),
                           dict(stride=2, padding=1, groups=96)),
                          ("5x5 s1 32 @16", (4, 32, 16, 16), (32, 32, 5, 5), dict(padding=2))]:
    chosen = F.conv_explain(xs, ws, measure=False, show=False, **kw).chosen
    print(f"{label:<24} auto runs {chosen}")

# %% [markdown]
# **INT8.** Post-training quantization (fuse, calibrate, convert) of a ResNet-18 of width 8;
# where the CPU has VNNI or AVX2 the products run in `lezero.kernels.int8_gemm` on uint8
# activations kept channels-last. A big enough product is split over Numba's thread pool;
# on busy cores waking the pool can cost more than the product, so the time is taken both
# as it runs and with every kernel on the calling thread (`lezero.runtime.serial_kernels`).

# %%
small = settled(resnet18(num_classes=10, small_input=True, base_width=8))
batch = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
int8_model = quantized(small, rng.standard_normal((16, 3, 32, 32)).astype(np.float32))
with lz.no_grad():
    want, got = small(batch).data, int8_model(batch).data
print(f"int8_gemm.ISA = {int8_gemm.ISA!r}; top-1 agreement with float "
      f"{(want.argmax(1) == got.argmax(1)).mean() * 100:.0f}% of {len(batch)}, "
      f"max |error| / max |logit| {np.abs(got - want).max() / np.abs(want).max():.3f}")
pair = [inference(int8_model, batch), inference(small, batch)]
for label, fns in (("as it runs", pair), ("serial kernels", [on_one_thread(f) for f in pair])):
    print(f"INT8 / float32, {label}: {round_ratios(fns, rounds=7)[0][0]:.2f}")

# %% [markdown]
# **Which library multiplies.** Where the `mkl` wheel is installed (LeZero depends on it on
# x86-64 Linux) and the CPU is Intel's, float products run on its `sgemm`, split over
# LeZero's threads, and INT8 layers of 16 or more input channels may run on its exact
# uint8 x int8 GEMM (elsewhere MKL's generic code was slower than NumPy's OpenBLAS and
# LeZero's int8 kernel: `policy.gemm = "auto"`); `lezero.runtime.policy.gemm = "numpy"`
# (or `LEZERO_GEMM=numpy`) keeps everything off MKL, `"mkl"` puts it all there. The step's helper times one BERT-sized product both
# ways.

# %%
from step67 import gemm_library  # noqa: E402

gemm_library()

# %% [markdown]
# **Threads and BLAS.** LeZero applies its thread policy on import, so a user sets no
# variable; `lezero.runtime.show()` lists each setting and where it came from (here the
# lines about threads). The comparison with PyTorch, Hugging Face and onnxruntime at real
# sizes is `python benchmarks/bench_real.py` (every row at two shapes, minutes;
# `--list` names the rows, `--quick` runs fewer rounds); `docs/performance.md` holds its table.

# %%
import io  # noqa: E402
import lezero.runtime  # noqa: E402

listing = io.StringIO()
lezero.runtime.show(file=listing)
print("\n".join(line for line in listing.getvalue().splitlines() if "thread" in line.lower()))
