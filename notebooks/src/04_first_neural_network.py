# %% [markdown]
# # 4. A first neural network
#
# This notebook follows `steps/step24.py`: a nonlinearity between two linear maps is enough
# to fit a curve or separate classes a line cannot. Everything here is built from
# `lezero.functions` operators and a hand-written gradient-descent step; layers, optimisers
# and losses as objects come later.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
# %matplotlib inline

# %% [markdown]
# ## The activations and their derivatives
# Each activation's backward is written with LeZero operators, so `lz.grad` gives its
# derivative (and could differentiate that again). Piecewise ones have flat derivatives
# with jumps at the kinks; smooth ones (GELU, SiLU, Mish) dip slightly below zero.

# %%
x = lz.Variable(np.linspace(-4, 4, 401))
acts = {"relu": F.relu, "leaky_relu(0.1)": lambda v: F.leaky_relu(v, 0.1), "elu": F.elu,
        "gelu": F.gelu, "silu": F.silu, "mish": F.mish, "softplus": F.softplus,
        "sigmoid": F.sigmoid, "hardswish": F.hardswish}
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4))
for name, act in acts.items():
    y = act(x)
    (dy,) = lz.grad(y, [x], grad_outputs=np.ones(x.shape))
    ax0.plot(x.data, y.data, label=name)
    ax1.plot(x.data, dy.data, label=name)
ax0.set_title("activation"); ax1.set_title("derivative (by backward)")
ax0.set_ylim(-1.5, 4); ax0.legend(fontsize=8); ax0.grid(alpha=0.3); ax1.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## Fitting a sine with a two-layer network
# `h = act(x @ W1 + b1)`, `y = h @ W2 + b2`, mean squared error, full-batch gradient
# descent. Hidden unit *j* is a smooth step near `x = -b1[j] / W1[0, j]`, so the steps are
# started at random places inside the data range. The spikes in the loss are steps that
# overshoot a narrow valley; plain gradient descent climbs back down.

# %%
rng = np.random.default_rng(0)
n = 100
xs = rng.random((n, 1)).astype(np.float32)
ys = (np.sin(2 * np.pi * xs) + 0.1 * rng.standard_normal((n, 1))).astype(np.float32)


def init_mlp(sizes, rng, scale_first=6.0):
    """Weights and biases for a chain of linear maps; the first layer's steps start
    inside [0, 1] (for the sine), later layers are scaled by 1/sqrt(fan-in)."""
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i == 0 and fan_in == 1:
            W = scale_first * rng.standard_normal((fan_in, fan_out))
            b = -W[0] * rng.random(fan_out)
        else:
            W = rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)
            b = np.zeros(fan_out)
        params += [lz.Variable(W.astype(np.float32)), lz.Variable(b.astype(np.float32))]
    return params


def mlp(x, params, act):
    """Linear maps with ``act`` between them (not after the last)."""
    *hidden, W_out, b_out = params
    for W, b in zip(hidden[::2], hidden[1::2]):
        x = act(F.matmul(x, W) + b)
    return F.matmul(x, W_out) + b_out


def sgd_step(loss, params, lr):
    for p in params:
        p.cleargrad()
    loss.backward()
    for p in params:
        p.data -= lr * p.grad.data


def mse(y, t):
    d = y - t
    return F.sum(d * d) / len(d)


params = init_mlp([1, 10, 1], np.random.default_rng(2))
losses = []
for step in range(2000):
    loss = mse(mlp(xs, params, F.sigmoid), ys)
    sgd_step(loss, params, lr=0.3)
    losses.append(loss.item())
print(f"loss after {len(losses)} steps: {losses[-1]:.4f} (the noise alone gives about 0.01)")

grid = np.linspace(0, 1, 200, dtype=np.float32)[:, None]
with lz.no_grad():
    fit = mlp(grid, params, F.sigmoid).data
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4))
ax0.semilogy(losses); ax0.set_xlabel("step"); ax0.set_ylabel("MSE"); ax0.set_title("loss")
ax1.scatter(xs, ys, s=10, label="data")
ax1.plot(grid, np.sin(2 * np.pi * grid), "k--", label="sin(2 pi x)")
ax1.plot(grid, fit, "r", label="network")
ax1.legend(); ax1.set_title("fit")
plt.show()

# %% [markdown]
# ## Does the activation matter?
# The same network, data and starting weights with four hidden activations. The curves
# show how quickly each one bends to the sine from the same start; ReLU gets a smaller
# step because its unbounded units make large steps unstable.

# %%
curves = {}
for name, act in {"sigmoid": F.sigmoid, "tanh": F.tanh, "gelu": F.gelu, "relu": F.relu}.items():
    params = init_mlp([1, 10, 1], np.random.default_rng(2))
    curve = []
    for step in range(1000):
        loss = mse(mlp(xs, params, act), ys)
        sgd_step(loss, params, lr=0.1 if name == "relu" else 0.3)
        curve.append(loss.item())
    curves[name] = curve
    print(f"{name:>8}: loss after 1000 steps {curve[-1]:.4f}")
for name, curve in curves.items():
    plt.semilogy(curve, label=name)
plt.xlabel("step"); plt.ylabel("MSE"); plt.legend(); plt.title("training loss by activation")
plt.show()

# %% [markdown]
# ## Classifying a spiral
# Three interleaved arms, 100 points each. The network outputs three scores per point;
# `log_softmax` turns them into log-probabilities and the loss is the mean negative
# log-probability of the true class (cross-entropy), picked out with indexing.
# `F.accuracy` is a metric: a constant, outside the graph.

# %%
def spiral(n_per_class, classes, rng):
    xs, ts = [], []
    for c in range(classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        theta = c * 2 * np.pi / classes + 4 * r + 0.2 * rng.standard_normal(n_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ts.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ts)


X, T = spiral(100, 3, np.random.default_rng(2))
params = init_mlp([2, 30, 3], np.random.default_rng(3))
history = []
for epoch in range(1500):
    logits = mlp(X, params, F.relu)
    loss = -F.sum(F.log_softmax(logits, axis=1)[np.arange(len(T)), T]) / len(T)
    sgd_step(loss, params, lr=1.0)
    if epoch % 10 == 0:
        history.append((epoch, loss.item(), F.accuracy(logits, T).item()))
print(f"final loss {history[-1][1]:.3f}, training accuracy {history[-1][2]:.3f}")

gx, gy = np.meshgrid(np.linspace(-1.1, 1.1, 200), np.linspace(-1.1, 1.1, 200))
with lz.no_grad():
    pred = mlp(np.stack([gx.ravel(), gy.ravel()], 1).astype(np.float32), params, F.relu)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.5))
ep, ls, acc = zip(*history)
ax0.plot(ep, ls, label="loss"); ax0.plot(ep, acc, label="accuracy")
ax0.set_xlabel("epoch"); ax0.legend(); ax0.set_title("training")
ax1.contourf(gx, gy, pred.data.argmax(1).reshape(gx.shape), alpha=0.25,
             levels=[-0.5, 0.5, 1.5, 2.5], cmap="brg")
ax1.scatter(X[:, 0], X[:, 1], c=T, s=12, cmap="brg"); ax1.set_title("decision regions")
plt.show()

# %% [markdown]
# ## Dropout: noise in training, identity at test time
# `F.dropout` zeroes entries with probability `p` and scales the rest by `1/(1-p)`, so the
# expected value is unchanged; under `lz.test_mode()` it returns its input untouched.
# `lz.manual_seed` makes the mask reproducible.

# %%
h = np.ones((4, 8), np.float32)
lz.manual_seed(0)
print("training:\n", F.dropout(h, p=0.5).data)
with lz.test_mode():
    print("test mode is the identity:", np.array_equal(F.dropout(h, p=0.5).data, h))
big = F.dropout(np.ones(100_000, np.float32), p=0.3).data
print(f"mean {big.mean():.3f} (expected 1), dropped fraction {np.mean(big == 0):.3f} (p = 0.3)")
