# %% [markdown]
# # 7. Pooling, attention and recurrence
#
# This notebook follows `steps/step30.py` and `steps/step31.py`. It looks at what pooling
# and resizing do to an image and to its gradient, at attention weights and at the memory
# the chunked attention path saves, and trains the fused LSTM. Every operator here has
# PyTorch's name, arguments and layout, and is tested against PyTorch and against
# numerical gradients.

# %%
import time
import tracemalloc

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import lezero as lz
import lezero.functions as F
from lezero import optim
from threadpoolctl import threadpool_limits
# %matplotlib inline

# One BLAS thread: the timings below are then comparable from run to run (on a busy
# machine, multithreaded BLAS on small matrices can be many times slower).
threadpool_limits(1)

# %% [markdown]
# ## Pooling and resizing a handwritten digit
# An 8 x 8 digit from scikit-learn's digits set, upsampled to 32 x 32, then summarised
# back down in different ways. Max pooling keeps strokes (the brightest pixel of each
# window), average pooling blurs them, adaptive pooling picks its own windows for any
# output size. Nearest-neighbour upsampling copies pixels; bilinear mixes the four
# nearest ones.

# %%
digit = load_digits().images[3].astype(np.float32)[None, None] / 16      # (1, 1, 8, 8)
big = F.interpolate(digit, scale_factor=4, mode="bilinear")
panels = {
    "digit 8x8": digit,
    "bilinear x4 (32x32)": big.data,
    "nearest x4": F.interpolate(digit, scale_factor=4).data,
    "max_pool2d(4) of 32x32": F.max_pool2d(big, 4).data,
    "avg_pool2d(4) of 32x32": F.avg_pool2d(big, 4).data,
    "adaptive_avg_pool2d to 5x5": F.adaptive_avg_pool2d(big, 5).data,
    "adaptive_max_pool2d to 3x3": F.adaptive_max_pool2d(big, 3).data,
    "lp_pool2d(p=4, 4)": F.lp_pool2d(big, 4, 4).data,
}
fig, axes = plt.subplots(1, len(panels), figsize=(18, 2.6))
for ax, (name, img) in zip(axes, panels.items()):
    ax.imshow(img[0, 0], cmap="gray_r")
    ax.set_title(name, fontsize=8)
    ax.axis("off")
plt.show()

# %% [markdown]
# ## Where the gradient goes
# The gradient of a sum of pooled values, seen on the input. Max pooling (3 x 3 windows,
# stride 2, so windows overlap) sends each output's gradient to one pixel, its window's
# maximum: a pixel that wins several windows collects several. Average pooling spreads
# each output's gradient evenly over its window, so the overlaps show as a grid.

# %%
x = lz.Variable(big.data)
F.max_pool2d(x, 3, stride=2).sum().backward()
g_max = x.grad.data[0, 0]
x.cleargrad()
F.avg_pool2d(x, 3, stride=2).sum().backward()
g_avg = x.grad.data[0, 0]
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
for ax, (name, img) in zip(axes, [("input", big.data[0, 0]), ("grad of max_pool2d", g_max),
                                  ("grad of avg_pool2d", g_avg)]):
    im = ax.imshow(img, cmap="magma")
    ax.set_title(name)
    ax.axis("off")
    fig.colorbar(im, ax=ax, fraction=0.046)
plt.show()
print("max-pool gradient values:", np.unique(g_max))

# %% [markdown]
# ## Attention weights
# `scaled_dot_product_attention(q, k, v)` is `softmax(q k^T / sqrt(E) + mask) v`. With `v`
# the identity the output *is* the weight matrix. A causal mask keeps row *i* from looking
# past column *i*; a boolean mask keeps where it is True; a float mask is added to the
# scores.

# %%
rng = np.random.default_rng(0)
L, E = 12, 16
q, k = rng.standard_normal((2, L, E)).astype(np.float32)
eye = np.eye(L, dtype=np.float32)
band = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :]) <= 2
maps = {"no mask": F.scaled_dot_product_attention(q, k, eye),
        "is_causal=True": F.scaled_dot_product_attention(q, k, eye, is_causal=True),
        "bool mask: |i - j| <= 2": F.scaled_dot_product_attention(q, k, eye, attn_mask=band)}
fig, axes = plt.subplots(1, 3, figsize=(13, 4))
for ax, (name, w) in zip(axes, maps.items()):
    ax.imshow(w.data, cmap="viridis", vmin=0)
    ax.set_title(name)
    ax.set_xlabel("key position")
axes[0].set_ylabel("query position")
plt.show()

# %% [markdown]
# ## Memory: plain vs chunked attention
# The plain path builds the L x L score matrix (several of them: scores, probabilities,
# and their gradients), so its memory grows with L squared. The chunked path walks the
# queries in blocks of rows, keeps one number per row (the softmax's log-sum-exp) and
# recomputes a block's probabilities in the backward pass. Its memory grows linearly.
# With a causal mask a block of rows never computes the keys after its last row, so the
# chunked path also does about half the work. Peak memory of forward + backward,
# measured with `tracemalloc` (times are from this shared machine, best of three):

# %%
def attention_step(length, chunk):
    qv = lz.Variable(rng.standard_normal((1, length, 32)).astype(np.float32))
    kv = rng.standard_normal((1, length, 32)).astype(np.float32)
    y = F.scaled_dot_product_attention(qv, kv, kv, is_causal=True, chunk_size=chunk)
    y.backward(grad=np.ones_like(y.data))


def attention_peak(length, chunk):
    """Peak MiB (traced) and the best of 3 times (untraced: tracing slows allocation)."""
    tracemalloc.start()
    attention_step(length, chunk)
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        attention_step(length, chunk)
        times.append(time.perf_counter() - t0)
    return peak, min(times)


lengths = [256, 512, 1024, 2048]
plain = [attention_peak(n, 0) for n in lengths]
chunked = [attention_peak(n, 128) for n in lengths]
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(lengths, [p for p, _ in plain], "o-", label="plain (0)")
ax.loglog(lengths, [p for p, _ in chunked], "s-", label="chunked (128 rows)")
ax.loglog(lengths, [n * n * 4 / 2 ** 20 for n in lengths], "k:", label="one L x L float32")
ax.set_xlabel("sequence length L")
ax.set_ylabel("peak MiB, forward + backward")
ax.legend()
ax.grid(alpha=0.3, which="both")
plt.show()
for n, (pm, pt), (cm, ct) in zip(lengths, plain, chunked):
    print(f"L={n:5d}  plain {pm:7.1f} MiB {pt * 1e3:7.1f} ms   chunked {cm:6.1f} MiB "
          f"{ct * 1e3:7.1f} ms")

# %% [markdown]
# ## The fused LSTM learns to continue a sine
# `F.lstm(input, hx, params)` runs a whole sequence as one operator: every step's input
# projection is one matrix product, the loop over time only does the recurrent product
# and in-place gate arithmetic, and the backward is hand-written backpropagation through
# time. The weights use PyTorch's layout (`w_ih` is (4H, I), gates i, f, g, o), so an
# `nn.LSTM` state dict fits as is. Here one layer of 32 units learns to predict the next
# value of noisy sine waves.

# %%
H, T, N = 32, 30, 16
params = [lz.Parameter((rng.standard_normal(s) / np.sqrt(H)).astype(np.float32))
          for s in [(4 * H, 1), (4 * H, H), (4 * H,), (4 * H,)]]
head = lz.Parameter((rng.standard_normal((1, H)) / np.sqrt(H)).astype(np.float32))


def sine_batch(n, noise=0.05):
    t = np.arange(T + 1)[:, None] * 0.3 + rng.uniform(0, 2 * np.pi, n)
    s = (np.sin(t) * (1 + 0.5 * np.sin(0.1 * t)) + noise * rng.standard_normal(t.shape))
    s = s.astype(np.float32)
    return s[:-1, :, None], s[1:, :, None]


opt = optim.Adam(params + [head], lr=0.01)
losses = []
for step in range(300):
    inputs, targets = sine_batch(N)
    y, _ = F.lstm(inputs, None, params)
    loss = F.mse_loss(F.linear(y, head), targets)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())

inputs, targets = sine_batch(1, noise=0.0)
with lz.no_grad():
    pred = F.linear(F.lstm(inputs, None, params)[0], head).data
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 3.6))
ax0.semilogy(losses)
ax0.set_xlabel("step")
ax0.set_ylabel("mse")
ax0.set_title("training loss")
ax1.plot(targets[:, 0, 0], "k.-", label="next value")
ax1.plot(pred[:, 0, 0], "r-", label="LSTM prediction")
ax1.legend()
ax1.set_title("one held-out sequence")
plt.show()
print(f"final training mse {np.mean(losses[-20:]):.4f}")

# %% [markdown]
# ## Fused layer vs the cell loop
# The same LSTM step by step with `lstm_cell` (built from LeZero operators, differentiable
# twice) gives the same numbers, at the cost of a graph node per gate per step.
# `benchmarks/bench_lstm.py` compares the fused layer with PyTorch's `nn.LSTM`.

# %%
def train_step(use_cells):
    inputs, targets = sine_batch(N)
    if use_cells:
        h = c = None
        outs = []
        for t in range(T):
            h, c = F.lstm_cell(inputs[t], (h, c), *params)
            outs.append(F.linear(h, head))
        loss = F.mse_loss(F.stack(outs), targets)
    else:
        y, _ = F.lstm(inputs, None, params)
        loss = F.mse_loss(F.linear(y, head), targets)
    for p in params + [head]:
        p.cleargrad()
    loss.backward()
    return loss


for use_cells in (False, True):
    train_step(use_cells)
    t0 = time.perf_counter()
    for _ in range(5):
        train_step(use_cells)
    print(f"{'lstm_cell loop' if use_cells else 'fused F.lstm  '}: "
          f"{(time.perf_counter() - t0) / 5 * 1e3:.1f} ms per training step")

# %% [markdown]
# ## Packed sequences
# A batch of sequences of different lengths, sorted longest first, is packed time step by
# time step: step *t* holds only the sequences still running (`batch_sizes[t]` of them).
# The fused LSTM then advances only those rows, so no work is spent on padding, and each
# sequence's final state is the state at its own last step.

# %%
lengths = [30, 24, 17, 9, 4]
batch = rng.standard_normal((T, len(lengths), 1)).astype(np.float32)
packed = F.pack_padded_sequence(batch, lengths)
out, (h_n, c_n) = F.lstm(packed, None, params)
padded, lens = F.pad_packed_sequence(out)
print("batch_sizes:", packed.batch_sizes.tolist())
print(f"rows computed: {out.data.shape[0]} (a padded batch would compute "
      f"{T * len(lengths)})")
fig, ax = plt.subplots(figsize=(8, 2.4))
ax.bar(range(T), packed.batch_sizes, color="tab:blue")
ax.set_xlabel("time step")
ax.set_ylabel("active sequences")
plt.show()
alone = np.stack([F.lstm(batch[:n, i:i + 1], None, params)[1][0].data[0, 0]
                  for i, n in enumerate(lengths)])
print("final states equal running each sequence alone:",
      np.allclose(h_n.data[0], alone, atol=1e-6))
