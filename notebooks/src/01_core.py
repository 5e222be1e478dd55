# %% [markdown]
# # 1. The define-by-run core
#
# This notebook follows `steps/step01.py` ... `step19.py`: Variables and Functions,
# automatic differentiation as a loop over creators, memory, higher-order derivatives,
# Newton's method and double backprop with `lz.grad`; and `step65.py`: a backend for a
# new chip.

# %%
import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
# %matplotlib inline

# %% [markdown]
# ## Numerical versus automatic differentiation
# Central differences lose accuracy both ways: a large step truncates the Taylor series, a
# small step drowns in rounding error. Backprop gives the exact chain-rule value.

# %%
def f(x):
    return F.exp(x ** 2) ** 2

x = lz.Variable(np.array(0.5))
f(x).backward()
exact = x.grad.item()
eps = np.logspace(-14, -1, 60)
errors = [abs((f(lz.Variable(np.array(0.5 + e))).item() - f(lz.Variable(np.array(0.5 - e))).item())
              / (2 * e) - exact) for e in eps]
plt.loglog(eps, errors)
plt.xlabel("step size eps"); plt.ylabel("|central difference - backprop|")
plt.title("Numerical differentiation error"); plt.show()
print("autodiff gradient:", exact)

# %% [markdown]
# ## The graph behind a result
# `get_dot_graph` gives Graphviz text; with Graphviz installed `plot_dot_graph` renders it.

# %%
a, b = lz.Variable(np.array(1.0), name="a"), lz.Variable(np.array(2.0), name="b")
y = F.tanh(a * b + a)
y.name = "y"
print(lz.utils.get_dot_graph(y, verbose=False))
try:
    from IPython.display import Image, display
    display(Image(lz.utils.plot_dot_graph(y, verbose=False, to_file="/tmp/lezero_graph.png")))
except RuntimeError as e:
    print(e)

# %% [markdown]
# ## Higher-order derivatives
# With `create_graph=True` each gradient is a graph of its own and can be differentiated again.

# %%
x = lz.Variable(np.linspace(-4, 4, 200))
y = F.tanh(x)
curves = [y.data]
for n in range(4):
    (y,) = lz.grad(y.sum(), x, create_graph=True)
    curves.append(y.data)
for n, c in enumerate(curves):
    plt.plot(x.data, c, label=f"order {n}")
plt.legend(); plt.title("tanh and its first four derivatives"); plt.show()

# %% [markdown]
# ## Gradient descent versus Newton's method on Rosenbrock's function

# %%
def rosenbrock(v):
    return 100 * (v[1] - v[0] ** 2) ** 2 + (v[0] - 1) ** 2

def run(method, steps):
    v = lz.Variable(np.array([-1.5, 2.0]))
    path = [v.data.copy()]
    for _ in range(steps):
        (g,) = lz.grad(rosenbrock(v), v, create_graph=(method == "newton"))
        if method == "newton":
            # both rows go through g's graph: keep it for the second (retain_graph)
            H = np.stack([lz.grad(g[k], v, retain_graph=True)[0].data for k in range(2)])
            v.data = v.data - np.linalg.solve(H, g.data)
        else:
            v.data = v.data - 1e-3 * g.data
        path.append(v.data.copy())
    return np.array(path)

gd, newton = run("gd", 5000), run("newton", 10)
X, Y = np.meshgrid(np.linspace(-2, 2, 200), np.linspace(-1, 3, 200))
plt.contour(X, Y, 100 * (Y - X ** 2) ** 2 + (X - 1) ** 2, levels=np.logspace(-1, 3.5, 20))
plt.plot(gd[:, 0], gd[:, 1], ".-", ms=2, label=f"gradient descent ({len(gd) - 1} steps)")
plt.plot(newton[:, 0], newton[:, 1], "o-", label=f"Newton ({len(newton) - 1} steps)")
plt.plot(1, 1, "r*", ms=12); plt.legend(); plt.show()
print("gradient descent ends at", gd[-1], "| Newton ends at", newton[-1])

# %% [markdown]
# ## Double backprop: a gradient penalty
# `lz.grad(..., create_graph=True)` returns gradients that can enter a new loss.

# %%
rng = np.random.default_rng(0)
W1 = lz.Variable(rng.standard_normal((2, 16)))
W2 = lz.Variable(rng.standard_normal((16, 1)))
xs = lz.Variable(rng.standard_normal((64, 2)))
history = []
for step in range(200):
    (gx,) = lz.grad((F.tanh(xs @ W1) @ W2).sum(), xs, create_graph=True)
    penalty = (((gx * gx).sum(axis=1) ** 0.5 - 1) ** 2).sum() / 64
    W1.cleargrad(); W2.cleargrad()
    penalty.backward()
    W1.data -= 0.05 * W1.grad.data
    W2.data -= 0.05 * W2.grad.data
    history.append(penalty.item())
plt.semilogy(history); plt.xlabel("step"); plt.ylabel("penalty"); plt.show()
print("penalty", history[0], "->", history[-1])

# %% [markdown]
# ## A new chip: a backend in a few lines (step 65)
# Operators ask `lezero.backends` for the backend of their inputs and use its namespace
# `xp`; a chip is one `Backend` object. Built on the strict device's memory (a
# `StrictArray` subclass: no implicit route to the host, transfers counted), this one has
# no float64 units and refuses a float64 array wherever one would appear. LeNet-5 trains
# on it, and a training step goes to the host once: `loss.item()`.

# %%
from lezero import backends, cuda, optim
from lezero.backends.strict import StrictArray, StrictBackend
from lezero.nn.models import LeNet5


class TinyArray(StrictArray):
    __slots__ = ()

    def __init__(self, array):
        if array.dtype == np.float64:
            raise TypeError("tinychip: no float64 on this device")
        super().__init__(array)


chip = backends.register(StrictBackend("tinychip", kind=TinyArray,
                                       capabilities=backends.Capabilities(
                                           dtypes=("bool", "int64", "float16", "float32"))))
try:
    chip.from_host(np.ones(2))
except TypeError as e:
    print("refused:", e)

lz.manual_seed(0)
rng = np.random.default_rng(0)
model = LeNet5(input_size=28).to_device("tinychip")
x = cuda.to_device(rng.standard_normal((16, 1, 28, 28)).astype(np.float32), "tinychip")
t = cuda.to_device(rng.integers(0, 10, 16), "tinychip")
opt = optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(8):
    with chip.count_transfers() as counts:
        loss = F.cross_entropy(model(x), t)
        model.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
plt.plot(losses, "o-"); plt.xlabel("step"); plt.ylabel("loss on tinychip"); plt.show()
print("parameters:", type(next(model.parameters()).data).__name__,
      "| host round trips in the last step:", counts)
