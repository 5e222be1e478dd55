# %% [markdown]
# # 3. Shapes, indexing and linear regression
#
# This notebook follows `steps/step21.py` and `steps/step23.py`. Shape and indexing
# operators move data without arithmetic, so their gradients are the inverse moves.
# The matrix product then gives us the first model worth training: a line fitted by
# gradient descent, checked against the closed-form least-squares solution.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
# %matplotlib inline

# %% [markdown]
# ## Moves and their inverses
# `broadcast_to` copies; its gradient `sum_to` adds the copies' gradients back.
# `transpose` permutes axes; its gradient applies the inverse permutation.

# %%
x = lz.Variable(np.arange(6.0).reshape(2, 3))
y = F.broadcast_to(x, (4, 2, 3))          # four copies
y.sum().backward()
print("each element was copied 4 times, so its gradient is 4:\n", x.grad.data)

x.cleargrad()
z = F.transpose(x) * np.arange(6.0).reshape(3, 2)   # weights laid out as x.T
z.sum().backward()
print("transpose gradient = the weights transposed back:\n", x.grad.data)

# %% [markdown]
# ## Padding modes
# `pad` follows NumPy: `constant`, `reflect`, `symmetric`, `edge` (alias `replicate`) and
# `wrap` (alias `circular`). Every mode except `constant` copies existing pixels, so it
# is an integer gather and its gradient counts how often each pixel was copied.

# %%
img = lz.Variable(np.add.outer(np.arange(4.0), np.arange(4.0)))
modes = ["constant", "reflect", "symmetric", "edge", "wrap"]
fig, axes = plt.subplots(2, len(modes), figsize=(13, 6.2))
for ax_img, ax_grad, mode in zip(axes[0], axes[1], modes):
    img.cleargrad()
    padded = F.pad(img, 3, mode=mode)
    padded.sum().backward()
    ax_img.imshow(padded.data, cmap="viridis")
    ax_img.add_patch(plt.Rectangle((2.5, 2.5), 4, 4, fill=False, color="w", lw=2))
    ax_img.set_title(f"pad mode={mode!r}")
    ax_grad.imshow(img.grad.data, cmap="magma")
    for (i, j), v in np.ndenumerate(img.grad.data):
        ax_grad.text(j, i, int(v), ha="center", va="center", color="c")
    ax_grad.set_title("gradient: copies per pixel")
for ax in axes.ravel():
    ax.set_xticks([]); ax.set_yticks([])
plt.tight_layout(); plt.show()

# %% [markdown]
# ## Indexing: reading is gathering, its gradient scatters and adds
# An element read twice receives two gradients. `gather(x, axis, index)` (PyTorch's
# argument order) picks one element per row: this is how a classifier's loss picks the
# logit of each sample's target class.

# %%
logits = lz.Variable(np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]]))
target = np.array([[0], [2]])
picked = F.gather(logits, 1, target)
picked.sum().backward()
print("picked:", picked.data.ravel())
print("gradient lands only on the picked logits:\n", logits.grad.data)

x = lz.Variable(np.zeros(5))
F.take(x, [0, 0, 0, 4, 4]).sum().backward()
print("take with repeated indices:", x.grad.data)
print("one_hot of the targets:\n", F.one_hot(target.ravel(), 3).data)

# %% [markdown]
# ## One notation for products: einsum
# Matrix products, batched products, traces and outer products are all `einsum` forms;
# its gradient is again an einsum of the other operands with the output gradient.

# %%
rng = np.random.default_rng(0)
a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
print("batched matmul == einsum:", np.allclose(F.einsum("bij,bjk->bik", a, b).data,
                                               F.matmul(a, b).data))
m = lz.Variable(rng.standard_normal((3, 3)))
F.einsum("ii", m).backward()
print("gradient of the trace is the identity:\n", m.grad.data)

# %% [markdown]
# ## Linear regression by gradient descent
# 100 noisy points near $y = 2x + 5$. The model is $\hat y = xW + b$; the loss is the mean
# squared error. Each step: forward, backward, move $W$ and $b$ a little against their
# gradients.

# %%
n = 100
xs = rng.random((n, 1))
ys = 5 + 2 * xs + rng.random((n, 1))

W = lz.Variable(np.zeros((1, 1)))
b = lz.Variable(np.zeros(1))
lr, losses, snapshots = 0.1, [], {}
for i in range(1000):
    diff = F.matmul(xs, W) + b - ys
    loss = F.sum(diff * diff) / n
    W.cleargrad(); b.cleargrad()
    loss.backward()
    W.data -= lr * W.grad.data
    b.data -= lr * b.grad.data
    losses.append(loss.item())
    if i in (0, 10, 50):
        snapshots[i] = (W.data.item(), b.data.item())
print(f"W = {W.data.item():.4f}, b = {b.data.item():.4f}, final loss {losses[-1]:.5f}")

# %% [markdown]
# The closed form solves the normal equations $(A^\top A)\,\theta = A^\top y$ with
# `F.solve`; gradient descent should land on the same line.

# %%
A = np.hstack([xs, np.ones((n, 1))])
theta = F.solve(A.T @ A, A.T @ ys).data.ravel()
print(f"normal equations: W = {theta[0]:.4f}, b = {theta[1]:.4f}")
print("gradient descent matches:", np.allclose([W.data.item(), b.data.item()], theta, atol=1e-3))

grid = np.linspace(0, 1, 50)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
ax1.scatter(xs, ys, s=12, alpha=0.6, label="data")
for i, (w_i, b_i) in snapshots.items():
    ax1.plot(grid, w_i * grid + b_i, "--", alpha=0.6, label=f"after {i + 1} steps")
ax1.plot(grid, W.data.item() * grid + b.data.item(), "r", lw=2.5, label="after 1000 steps")
ax1.plot(grid, theta[0] * grid + theta[1], "k:", lw=2, label="least squares")
ax1.set_xlabel("x"); ax1.set_ylabel("y"); ax1.set_title("Linear regression fit"); ax1.legend()
ax2.semilogy(losses)
ax2.set_xlabel("step"); ax2.set_ylabel("mean squared error"); ax2.set_title("Training loss")
plt.tight_layout(); plt.show()

# %% [markdown]
# ## Features from shape operators: a cubic fit with `F.linear`
# `stack` builds the features $[x, x^2, x^3]$; `F.linear` (PyTorch layout, weight is
# `(out_features, in_features)`) maps them to a prediction in one fused operator.

# %%
xs2 = np.sort(rng.uniform(-1, 1, (60, 1)), axis=0)
ys2 = np.sin(3 * xs2) + 0.1 * rng.standard_normal((60, 1))
feats = F.concatenate([xs2, xs2 ** 2, xs2 ** 3], axis=1)
w = lz.Variable(np.zeros((1, 3)))
c = lz.Variable(np.zeros(1))
for i in range(3000):
    diff = F.linear(feats, w, c) - ys2
    loss = F.sum(diff * diff) / len(xs2)
    w.cleargrad(); c.cleargrad()
    loss.backward()
    w.data -= 0.3 * w.grad.data
    c.data -= 0.3 * c.grad.data
print("cubic weights:", np.round(w.data, 3), "bias:", np.round(c.data, 3),
      f"loss {loss.item():.4f}")
plt.scatter(xs2, ys2, s=12, alpha=0.6, label="data")
plt.plot(xs2, F.linear(feats, w, c).data, "r", lw=2, label="cubic fit")
plt.title("Cubic features + F.linear"); plt.legend(); plt.show()
