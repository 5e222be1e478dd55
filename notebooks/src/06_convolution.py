# %% [markdown]
# # 6. Convolution: im2col, Winograd, FFT, direct, and which one wins where
#
# This notebook follows `steps/step26.py` to `steps/step29.py`. A convolution can be
# computed in several ways that give the same numbers (up to rounding) at very different
# speeds: a patch matrix and one GEMM (**im2col**), small-tile transforms that save
# multiplications (**Winograd** F(2x2,3x3) and F(4x4,3x3)), products in frequency space
# (**FFT**), or a plain loop over the kernel taps (**direct**; for 1x1 kernels a GEMM on
# the input itself). `F.conv2d(..., algo="auto")` picks one per layer and per product.
# Below we look at what im2col builds, check that all algorithms agree, and then measure
# on this machine which one is fastest at which shape.

# %%
import json
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import lezero as lz
import lezero.functions as F
from lezero.functions.conv import autotune, parallel, select
# %matplotlib inline

rng = np.random.default_rng(0)
ALGOS = list(select.ALGORITHMS)
COLORS = dict(zip(ALGOS, ["tab:blue", "tab:orange", "tab:red", "tab:green", "tab:purple"]))
print("algorithms:", ALGOS, "| threads per convolution:", parallel.threads())

# %% [markdown]
# ## What im2col builds
# `F.unfold` copies every 3 x 3 window of a digit into one column. The convolution with
# any number of filters is then one matrix product: each filter is a row of 9 weights,
# each output pixel a column. Below: the digit, its patch matrix (9 rows, one per kernel
# tap; 36 columns, one per output pixel) and the result of an edge filter computed both
# ways.

# %%
digit = load_digits().images[0].astype(np.float32)[None, None] / 16      # (1, 1, 8, 8)
cols = F.unfold(digit, 3).data[0]                                        # (9, 36)
edge = np.array([[[[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]]], np.float32)  # Sobel x
by_gemm = (edge.reshape(1, 9) @ cols).reshape(6, 6)
by_conv = F.conv2d(digit, edge).data[0, 0]
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), gridspec_kw={"width_ratios": [1, 3, 1]})
axes[0].imshow(digit[0, 0], cmap="gray_r")
axes[0].set_title("digit 8x8")
axes[1].imshow(cols, cmap="gray_r", aspect="auto")
axes[1].set_title("unfold: 9 taps x 36 windows")
axes[2].imshow(by_conv, cmap="coolwarm")
axes[2].set_title("Sobel-x response 6x6")
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
plt.show()
print("W @ unfold(x) == conv2d(x, W):", np.allclose(by_gemm, by_conv, atol=1e-6))

# %% [markdown]
# ## They agree
# `F.conv_explain` runs every algorithm on random data and compares it with a float64
# reference. Winograd F(4x4) trades a few bits of precision for its 4x fewer
# multiplications; everything else stays within a few float32 rounding steps.

# %%
ex = F.conv_explain((8, 32, 24, 24), (32, 32, 3, 3), padding=1, repeat=2)

# %%
errors = {op: F.conv_explain((4, 16, 16, 16), (16, 16, 3, 3), padding=1, op=op,
                             measure=False, show=False) for op in ("forward", "grad_input",
                                                                   "grad_weight")}
for op, e in errors.items():
    print(f"{op:<12}", "  ".join(f"{r['algo']}={r['rel_error']:.1e}" for r in e.rows
                                  if r["rel_error"] is not None))

# %% [markdown]
# ## Which algorithm wins: 3x3 layers as the channels grow
# Forward pass of a 3x3, stride-1 convolution on 24 x 24 images, batch 8, for growing
# channel counts (in = out). Winograd's savings are in the GEMMs, so it pulls ahead once
# the channel contraction dominates; with few channels its tile transforms cost more than
# they save, and im2col (or the tap loop) is faster.


# %%
def measure_all(x_shape, w_shape, op="forward", repeat=3, **kw):
    """Measured ms per algorithm (None where it does not apply)."""
    e = F.conv_explain(x_shape, w_shape, op=op, repeat=repeat, show=False, **kw)
    return {r["algo"]: r["measured_ms"] for r in e.rows}, e.chosen


channels = [4, 8, 16, 32, 64, 128]
sweep = [measure_all((8, c, 24, 24), (c, c, 3, 3), padding=1) for c in channels]
fig, ax = plt.subplots(figsize=(7, 4))
for algo in ALGOS:
    ys = [m[algo] for m, _ in sweep]
    if any(y is not None for y in ys):
        ax.plot(channels, ys, "o-", label=algo, color=COLORS[algo])
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("channels (in = out)")
ax.set_ylabel("forward ms")
ax.set_title("3x3 conv, 24x24, batch 8")
ax.legend()
plt.show()
for c, (m, chosen) in zip(channels, sweep):
    best = min((v, k) for k, v in m.items() if v is not None)[1]
    print(f"{c:>4} channels: fastest {best:<13} cost model picks {chosen}")

# %% [markdown]
# ## Which algorithm wins: growing kernels
# Same layer shape (16 channels, 40 x 40, batch 4), kernels from 3 x 3 to 15 x 15 with
# "same" padding. im2col's patch matrix grows with k^2; the FFT's cost barely moves, so
# it takes over for large kernels.

# %%
ks = [3, 5, 7, 9, 11, 15]
ksweep = [measure_all((4, 16, 40, 40), (16, 16, k, k), padding=k // 2, repeat=2) for k in ks]
fig, ax = plt.subplots(figsize=(7, 4))
for algo in ("im2col", "fft", "direct"):
    ax.plot(ks, [m[algo] for m, _ in ksweep], "o-", label=algo, color=COLORS[algo])
ax.set_yscale("log")
ax.set_xlabel("kernel size k (k x k)")
ax.set_ylabel("forward ms")
ax.set_title("16 -> 16 channels, 40x40, batch 4")
ax.legend()
plt.show()

# %% [markdown]
# ## Which algorithm wins: a map over the three products
# For a handful of typical layers, the measured time of every applicable algorithm for
# the forward pass and both gradients, relative to the fastest (1.0 = the winner). Empty
# cells: the algorithm does not apply (Winograd needs 3x3, stride 1).

# %%
LAYERS = [
    ("3x3 64ch 32x32 b16", (16, 64, 32, 32), (64, 64, 3, 3), dict(padding=1)),
    ("3x3 16ch 32x32 b16", (16, 16, 32, 32), (16, 16, 3, 3), dict(padding=1)),
    ("3x3 s2 32->64 b8", (8, 32, 32, 32), (64, 32, 3, 3), dict(padding=1, stride=2)),
    ("1x1 64->128 b16", (16, 64, 16, 16), (128, 64, 1, 1), {}),
    ("depthwise 3x3 64ch", (8, 64, 32, 32), (64, 1, 3, 3), dict(padding=1, groups=64)),
    ("LeNet c1 1->6 5x5 b64", (64, 1, 32, 32), (6, 1, 5, 5), {}),
    ("LeNet c2 6->16 5x5 b64", (64, 6, 14, 14), (16, 6, 5, 5), {}),
    ("11x11 16ch 48x48 b4", (4, 16, 48, 48), (16, 16, 11, 11), dict(padding=5)),
]
OPS = ("forward", "grad_input", "grad_weight")
grid = np.full((len(LAYERS) * 3, len(ALGOS)), np.nan)
labels = []
for i, (name, xs, ws, kw) in enumerate(LAYERS):
    for j, op in enumerate(OPS):
        m, _ = measure_all(xs, ws, op=op, repeat=2, **kw)
        fastest = min(v for v in m.values() if v is not None)
        for a, algo in enumerate(ALGOS):
            if m[algo] is not None:
                grid[3 * i + j, a] = m[algo] / fastest
        labels.append(f"{name} | {op}")
fig, ax = plt.subplots(figsize=(9, 10))
im = ax.imshow(np.log2(grid), cmap="RdYlGn_r", vmin=0, vmax=4, aspect="auto")
for r in range(grid.shape[0]):
    for c in range(grid.shape[1]):
        if not np.isnan(grid[r, c]):
            ax.text(c, r, f"{grid[r, c]:.1f}", ha="center", va="center", fontsize=7)
ax.set_xticks(range(len(ALGOS)), ALGOS, rotation=30)
ax.set_yticks(range(len(labels)), labels, fontsize=7)
ax.set_title("time / fastest (1.0 = winner)")
fig.colorbar(im, ax=ax, label="log2(time / fastest)")
plt.show()

# %% [markdown]
# ## Autotuning
# With `Config.conv_autotune` on, the first call in a shape bucket times the candidates
# and stores the winner in a JSON file; later calls (and later runs) read it. Batch 5
# and 6 share a bucket, so the second step below costs no measurement.

# %%
with tempfile.TemporaryDirectory() as tmp:
    os.environ[autotune.ENV_FILE] = os.path.join(tmp, "conv.json")
    autotune.clear_memory()
    w = lz.Parameter((rng.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32))
    with lz.using_config("conv_autotune", True):
        for batch in (6, 5):
            x = lz.Variable(rng.standard_normal((batch, 16, 20, 20)).astype(np.float32))
            t0 = time.perf_counter()
            F.conv2d(x, w, padding=1).sum().backward()
            print(f"batch {batch}: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    for key, entry in json.load(open(os.environ[autotune.ENV_FILE]))["entries"].items():
        print(f"{key}\n   -> {entry['algo']}  {entry['ms']}")
    del os.environ[autotune.ENV_FILE]
    autotune.clear_memory()
