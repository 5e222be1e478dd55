# %% [markdown]
# # 10. Layers, optimizers and training loops with `lezero.nn`
#
# This notebook follows steps 32, 33, 34 and 37. Models are now built from `nn` layers
# (PyTorch's names, arguments and parameter layouts), trained by `lezero.optim`
# optimizers, and fed by a `DataLoader`. We compare optimizers on the spiral, see what
# batch norm and dropout do to a digit classifier (and why `eval()` matters), and train
# recurrent networks on a sine wave with truncated backpropagation in time.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero.data import DataLoader
from lezero.data.datasets import Digits, SinCurve, Spiral
# %matplotlib inline

# %% [markdown]
# ## Modules hold parameters
# Assigning a layer to an attribute registers it; `named_parameters()` and `state_dict()`
# walk the tree in assignment order and give PyTorch's key names. The repr counts the
# parameters of every subtree.

# %%
lz.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, sizes, act=nn.ReLU):
        super().__init__()
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(act())
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


model = MLP([2, 30, 30, 3])
print(model)
print(list(model.state_dict()))

# %% [markdown]
# ## Optimizers on the spiral
# The same network and the same initial weights, trained with four update rules for 100
# epochs of mini-batches of 30. Plain SGD is still descending after 100 epochs; with
# momentum, RMSprop or Adam the loss is several times lower within the first 40.

# %%
train_set, test_set = Spiral(train=True), Spiral(train=False)


def accuracy(model, x, t):
    model.eval()
    with lz.no_grad():
        pred = model(x).data.argmax(axis=1)
    model.train()
    return float((pred == t).mean())


def train_spiral(make_opt, epochs=100, seed=0):
    lz.manual_seed(seed)
    model = MLP([2, 30, 30, 3])
    opt = make_opt(model.parameters())
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(train_set, batch_size=30, shuffle=True, seed=seed)
    losses = []
    for epoch in range(epochs):
        total = 0.0
        for x, t in loader:
            loss = criterion(model(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(t)
        losses.append(total / len(train_set))
    return model, losses


runs = {
    "SGD lr=0.1": lambda p: optim.SGD(p, lr=0.1),
    "SGD lr=0.1, momentum=0.9": lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
    "RMSprop lr=0.003": lambda p: optim.RMSprop(p, lr=0.003),
    "Adam lr=0.01": lambda p: optim.Adam(p, lr=0.01),
}
results = {}
for name, make_opt in runs.items():
    t0 = time.perf_counter()
    results[name] = train_spiral(make_opt)
    acc = accuracy(results[name][0], test_set.data, test_set.targets)
    print(f"{name:<26} final loss {results[name][1][-1]:.4f}  test accuracy {acc:.3f}  "
          f"({time.perf_counter() - t0:.1f} s)")

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.5))
for name, (_, losses) in results.items():
    ax0.plot(np.arange(1, len(losses) + 1), losses, label=name)
ax0.set_yscale("log"); ax0.set_xlabel("epoch"); ax0.set_ylabel("training loss")
ax0.set_title("training curves"); ax0.legend(); ax0.grid(alpha=0.3)

best = results["Adam lr=0.01"][0]
grid = np.stack(np.meshgrid(np.linspace(-1.1, 1.1, 200), np.linspace(-1.1, 1.1, 200)),
                axis=-1).reshape(-1, 2).astype(np.float32)
with lz.no_grad():
    regions = best(grid).data.argmax(axis=1).reshape(200, 200)
ax1.contourf(np.linspace(-1.1, 1.1, 200), np.linspace(-1.1, 1.1, 200), regions, alpha=0.3,
             levels=[-0.5, 0.5, 1.5, 2.5], cmap="brg")
ax1.scatter(*train_set.data.T, c=train_set.targets, cmap="brg", s=10)
ax1.set_title("Adam: decision regions and training points"); ax1.set_aspect("equal")
plt.show()

# %% [markdown]
# ## Batch norm and dropout on handwritten digits
# scikit-learn's 8x8 digits (1438 training, 359 test images). Three versions of a
# 64-128-128-10 network: plain, with `BatchNorm1d` after each hidden linear layer, and
# with batch norm plus `Dropout(0.3)`, all trained by SGD with momentum from the same
# seed. After every epoch we record the training loss and, in evaluation mode, the
# accuracy on the training and the test images.

# %%
digits_train, digits_test = Digits(train=True), Digits(train=False)


def digit_model(batch_norm, dropout):
    layers = [nn.Flatten()]
    for n_in, n_out in ((64, 128), (128, 128)):
        layers.append(nn.Linear(n_in, n_out))
        if batch_norm:
            layers.append(nn.BatchNorm1d(n_out))
        layers.append(nn.ReLU())
        if dropout:
            layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(128, 10))
    return nn.Sequential(*layers)


def digits_accuracy(model, dataset, batch_size=128):
    correct = 0
    with lz.no_grad():
        for i in range(0, len(dataset), batch_size):
            pred = model(dataset.data[i:i + batch_size]).data.argmax(axis=1)
            correct += int((pred == dataset.targets[i:i + batch_size]).sum())
    return correct / len(dataset)


def train_digits(batch_norm, dropout, epochs=20):
    lz.manual_seed(0)
    model = digit_model(batch_norm, dropout)
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(digits_train, batch_size=64, shuffle=True, seed=0)
    history = {"loss": [], "train": [], "test": []}
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for x, t in loader:
            loss = F.cross_entropy(model(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(t)
        model.eval()
        history["loss"].append(total / len(digits_train))
        history["train"].append(digits_accuracy(model, digits_train))
        history["test"].append(digits_accuracy(model, digits_test))
    return model, history


variants = {"plain": (False, 0.0), "batch norm": (True, 0.0),
            "batch norm + dropout 0.3": (True, 0.3)}
digit_runs = {}
for name, (bn, p) in variants.items():
    digit_runs[name] = train_digits(bn, p)
    h = digit_runs[name][1]
    print(f"{name:<26} train accuracy {h['train'][-1]:.3f}  test accuracy {h['test'][-1]:.3f}")

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.5))
for (name, (_, h)), color in zip(digit_runs.items(), ["C0", "C1", "C2"]):
    epochs = np.arange(1, len(h["loss"]) + 1)
    ax0.plot(epochs, h["loss"], color=color, label=name)
    ax1.plot(epochs, h["train"], color=color, linestyle="--", label=f"{name} (train)")
    ax1.plot(epochs, h["test"], color=color, label=f"{name} (test)")
ax0.set_yscale("log"); ax0.set_xlabel("epoch"); ax0.set_ylabel("training loss")
ax0.legend(); ax0.grid(alpha=0.3); ax0.set_title("loss")
ax1.set_ylim(0.85, 1.005); ax1.set_xlabel("epoch"); ax1.set_ylabel("accuracy")
ax1.legend(fontsize=8); ax1.grid(alpha=0.3); ax1.set_title("accuracy (evaluation mode)")
plt.show()

# %% [markdown]
# One run's history alone is what `lz.utils.plot_history` draws: it takes a dict of lists
# (as here) or the list of per-epoch dicts that the example scripts' `fit` returns, puts
# losses on one panel and accuracies on another, and writes a PNG when given a path
# (atomically; the examples write `OUT/history.png` this way).

# %%
fig = lz.utils.plot_history(digit_runs["batch norm + dropout 0.3"][1],
                            title="batch norm + dropout 0.3")
plotted = {line.get_label(): list(line.get_ydata()) for ax in fig.axes for line in ax.lines}
print("plotted exactly the history:", plotted == digit_runs["batch norm + dropout 0.3"][1])
fig

# %% [markdown]
# ### Forgetting `eval()`
# In training mode dropout keeps dropping units and batch norm normalises with the
# statistics of whatever batch it is given, so test accuracy becomes noisy and depends on
# the batch size. In evaluation mode it is a fixed function of each image.

# %%
model = digit_runs["batch norm + dropout 0.3"][0]
state = model.state_dict()          # training mode would move the running statistics
for mode in ("eval", "train"):
    getattr(model, mode)()
    accs = {bs: digits_accuracy(model, digits_test, bs) for bs in (128, 16, 4)}
    print(f"{mode:<6} mode: " + ", ".join(f"batches of {bs}: {a:.3f}" for bs, a in accs.items()))
model.load_state_dict(state)
model.eval()

# %% [markdown]
# ## Recurrent networks and truncated backpropagation in time
# A noisy sine of 1000 steps; the network reads y(t) and predicts y(t + 1). It runs
# over windows of 30 steps, carrying its state across windows. After each window's
# backward, `loss.unchain_backward()` cuts the graph behind the window, and the carried
# state is made a leaf with `unchain()` (it is an output of the fused recurrent operator
# beside the sequence, so the loss does not reach it). Each fused layer (`nn.RNN`,
# `nn.GRU`, `nn.LSTM`) runs a whole window in one Function.

# %%
sin_train, sin_test = SinCurve(train=True), SinCurve(train=False)
seq_x = sin_train.data.reshape(-1, 1, 1)
seq_t = sin_train.targets.reshape(-1, 1, 1)


class Recurrent(nn.Module):
    def __init__(self, kind, hidden=32):
        super().__init__()
        self.rnn = getattr(nn, kind)(1, hidden)
        self.fc = nn.Linear(hidden, 1)

    def forward(self, x, state=None):
        out, state = self.rnn(x, state)
        return self.fc(out), state


def cut(state):
    for s in (state if isinstance(state, tuple) else (state,)):
        s.unchain()


def train_sine(kind, epochs=40, bptt=30, lr=0.003):
    lz.manual_seed(0)
    model = Recurrent(kind)
    opt = optim.Adam(model.parameters(), lr=lr)
    losses = []
    for epoch in range(epochs):
        state, total = None, 0.0
        for start in range(0, len(seq_x), bptt):
            y, state = model(seq_x[start:start + bptt], state)
            loss = F.mse_loss(y, seq_t[start:start + bptt])
            opt.zero_grad()
            loss.backward()
            loss.unchain_backward()
            cut(state)
            opt.step()
            total += loss.item() * len(y)
        losses.append(total / len(seq_x))
    return model, losses


sine_runs = {}
for kind in ("RNN", "GRU", "LSTM"):
    t0 = time.perf_counter()
    sine_runs[kind] = train_sine(kind)
    print(f"{kind:<5} final training loss {sine_runs[kind][1][-1]:.4f} "
          f"({time.perf_counter() - t0:.1f} s)")

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.5))
for kind, (model, losses) in sine_runs.items():
    ax0.plot(np.arange(1, len(losses) + 1), losses, label=kind)
    with lz.no_grad():
        pred, _ = model(sin_test.data.reshape(-1, 1, 1))
    err = float(np.mean((pred.data.reshape(-1) - sin_test.targets.reshape(-1)) ** 2))
    ax1.plot(pred.data.reshape(-1), label=f"{kind} (test MSE {err:.4f})")
ax1.plot(sin_test.targets.reshape(-1), "k--", lw=1, label="target")
ax0.set_yscale("log"); ax0.set_xlabel("epoch"); ax0.set_ylabel("training MSE")
ax0.set_title("training curves"); ax0.legend(); ax0.grid(alpha=0.3)
ax1.set_xlabel("t"); ax1.set_title("one-step-ahead prediction on the clean curve")
ax1.legend(fontsize=8); ax1.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## Running free: feeding predictions back
# Training always gave the network the true y(t) (teacher forcing) and asked for one step
# ahead. Here, after a warm-up on the first 200 clean values, the LSTM is fed its own
# predictions instead. Its one-step predictions are damped near the peaks (the plot above:
# well under 1 at t = 250), an error far larger than the change of the sine from one step
# to the next (about 0.006). Fed back, the error compounds at every step: the
# free-running sequence leaves the sine within a few dozen steps and settles at a fixed
# point. Learning to generate takes training on generated sequences (or on many periods),
# not only on one-step-ahead targets.

# %%
lstm_model = sine_runs["LSTM"][0]
warm = sin_test.data[:200].reshape(-1, 1, 1)
with lz.no_grad():
    y, state = lstm_model(warm)
    value = y.data[-1:].reshape(1, 1, 1)
    generated = []
    for _ in range(600):
        y, state = lstm_model(value, state)
        value = y.data.reshape(1, 1, 1)
        generated.append(float(value[0, 0, 0]))
plt.figure(figsize=(10, 3.5))
plt.plot(np.arange(1000), sin_test.targets.reshape(-1), "k--", lw=1, label="sine")
plt.plot(np.arange(200), sin_test.data[:200, 0], label="warm-up input")
plt.plot(np.arange(200, 800), generated, label="LSTM, free-running")
plt.legend(); plt.grid(alpha=0.3); plt.xlabel("t")
plt.show()
