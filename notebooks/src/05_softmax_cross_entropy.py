# %% [markdown]
# # 5. Softmax and cross entropy
#
# This notebook follows `steps/step25.py`. A classifier gives one score (logit) per class;
# softmax turns the scores into probabilities and cross entropy measures how much
# probability the model gave to the right class. LeZero's `F.cross_entropy` computes both
# in one fused operator, as `torch.nn.functional.cross_entropy` does, and we use it to
# train a small network on a spiral that no straight line can separate.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
# %matplotlib inline
rng = np.random.default_rng(0)
lz.manual_seed(0)

# %% [markdown]
# ## Softmax, and the loss of one sample
# `p_c = exp(x_c) / sum_k exp(x_k)`. Cross entropy for target class `t` is `-log p_t`: zero
# when the model puts all its probability on `t`, growing without bound as `p_t` goes to 0.
# Its gradient with respect to the logits is `softmax(x) - onehot(t)`: push the right
# class's score up, and every other score down in proportion to its probability.

# %%
x = lz.Variable(np.array([[2.0, 1.0, 0.1]], np.float32))
loss = F.cross_entropy(x, np.array([0]))
loss.backward()
p = F.softmax(x, axis=1).data
print("softmax        ", np.round(p, 4))
print("-log p[0]      ", float(-np.log(p[0, 0])), " loss", loss.item())
print("gradient       ", np.round(x.grad.data, 4))
print("softmax - onehot", np.round(p - np.array([[1, 0, 0]]), 4))

# %%
pt = np.linspace(0.01, 1, 200)
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(pt, -np.log(pt))
ax.set_xlabel("probability of the correct class"); ax.set_ylabel("cross entropy")
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## Why fuse? Large logits
# Softmax followed by log overflows or underflows once logits are large: `exp(1000)` is
# infinite in float32. The fused operator subtracts each row's maximum and takes
# `logsumexp(x) - x_t`, which stays exact.

# %%
big = np.array([[1000.0, 0.0, -1000.0]], np.float32)
with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
    e = np.exp(big)
    naive = -np.log(e[0, 1] / e.sum())
print("naive softmax then log:", naive)
print("fused cross_entropy:   ", F.cross_entropy(big, np.array([1])).item())

# %% [markdown]
# ## Targets, weights and smoothing
# Targets can be class indices or probabilities. `weight` rescales classes (the mean then
# divides by the summed weight of the targets, as in PyTorch), `ignore_index` drops
# positions, and `label_smoothing` mixes the target with the uniform distribution.

# %%
logits = rng.standard_normal((4, 3)).astype(np.float32)
target = np.array([0, 2, -100, 1])
w = np.array([1.0, 2.0, 0.5], np.float32)
print("plain          ", F.cross_entropy(logits, target).item())
print("class weights  ", F.cross_entropy(logits, target, weight=w).item())
print("smoothing 0.1  ", F.cross_entropy(logits, target, label_smoothing=0.1).item())
soft = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
print("one-hot probabilities equal indices:",
      np.isclose(F.cross_entropy(logits, soft).item(),
                 F.cross_entropy(logits, np.array([0, 2, 1, 1])).item()))

# %% [markdown]
# ## The spiral
# Three arms of 100 points winding around the origin.

# %%
def spiral(n_per_class=100, n_classes=3, noise=0.2):
    xs, ts = [], []
    for c in range(n_classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        angle = c * 2 * np.pi / n_classes + 4.0 * r + noise * rng.standard_normal(n_per_class)
        xs.append(np.stack([r * np.sin(angle), r * np.cos(angle)], axis=1))
        ts.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ts)


x_train, t_train = spiral()
markers = ["o", "x", "^"]
fig, ax = plt.subplots(figsize=(4.5, 4.5))
for c in range(3):
    ax.scatter(*x_train[t_train == c].T, marker=markers[c], s=18, label=f"class {c}")
ax.set_aspect("equal"); ax.legend()
plt.show()

# %% [markdown]
# ## A two-layer network and stochastic gradient descent
# `h = relu(x W1^T + b1)`, `logits = h W2^T + b2`, trained on shuffled mini-batches of 30
# with a hand-written update `p -= lr * grad`.

# %%
hidden = 30
W1 = lz.Variable((rng.standard_normal((hidden, 2)) * np.sqrt(2 / 2)).astype(np.float32))
b1 = lz.Variable(np.zeros(hidden, np.float32))
W2 = lz.Variable((rng.standard_normal((3, hidden)) * np.sqrt(1 / hidden)).astype(np.float32))
b2 = lz.Variable(np.zeros(3, np.float32))
params = [W1, b1, W2, b2]


def model(x):
    return F.matmul(F.relu(F.matmul(x, W1.T) + b1), W2.T) + b2


lr, batch, epochs = 1.0, 30, 300
history = []
for epoch in range(epochs):
    order = rng.permutation(len(x_train))
    total = 0.0
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        loss = F.cross_entropy(model(x_train[idx]), t_train[idx])
        for p in params:
            p.cleargrad()
        loss.backward()
        for p in params:
            p.data -= lr * p.grad.data
        total += loss.item() * len(idx)
    history.append(total / len(x_train))
with lz.no_grad():
    accuracy = float((model(x_train).data.argmax(axis=1) == t_train).mean())
print(f"final loss {history[-1]:.4f}, training accuracy {accuracy:.3f}")

fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(history)
ax.set_xlabel("epoch"); ax.set_ylabel("mean cross entropy"); ax.set_yscale("log")
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## The decision boundary
# Colour every point of a grid by the class the network predicts. The regions follow the
# arms: the hidden relu units cut the plane into pieces and the output layer assigns them.

# %%
g = np.linspace(-1.1, 1.1, 300, dtype=np.float32)
gx, gy = np.meshgrid(g, g)
grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
with lz.no_grad():
    region = model(grid).data.argmax(axis=1).reshape(gx.shape)
fig, ax = plt.subplots(figsize=(5, 5))
ax.contourf(gx, gy, region, levels=[-0.5, 0.5, 1.5, 2.5], alpha=0.3,
            colors=["C0", "C1", "C2"])
for c in range(3):
    ax.scatter(*x_train[t_train == c].T, marker=markers[c], s=18, color=f"C{c}")
ax.set_aspect("equal"); ax.set_title(f"decision regions (accuracy {accuracy:.2f})")
plt.show()
