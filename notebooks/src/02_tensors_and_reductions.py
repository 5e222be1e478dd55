# %% [markdown]
# # 2. Tensors, elementwise math and reductions
#
# This notebook follows `steps/step20.py` (tensors and broadcasting) and `steps/step22.py`
# (reductions). Every operator here is a `Function` whose forward runs on NumPy (or CuPy)
# arrays and whose backward is written with LeZero operators, so gradients of any order
# are available.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import lezero as lz
import lezero.functions as F
# %matplotlib inline

# %% [markdown]
# ## Elementwise functions and their derivatives
# One backward pass over a grid of points gives the derivative at every point at once
# (the output is a sum of independent terms). Each dashed curve is autodiff; the dots are
# central differences.

# %%
names = ["tanh", "erf", "arctan", "sin", "arcsinh", "log1p"]
grid = np.linspace(-0.95, 3, 200)
fig, axes = plt.subplots(2, 3, figsize=(11, 6))
for ax, name in zip(axes.flat, names):
    f = getattr(F, name)
    x = lz.Variable(grid.copy())
    y = f(x)
    y.sum().backward()
    pts = grid[::20]
    numeric = lz.utils.numerical_grad(lambda t: f(t).sum(), pts)[0]
    ax.plot(grid, y.data, label=name)
    ax.plot(grid, x.grad.data, "--", label=f"d{name}/dx")
    ax.plot(pts, numeric, "k.", label="central diff.")
    ax.set_title(name)
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# How close is each backward to the numbers? The largest difference over 50 random points
# per function, in float64:

# %%
domains = {"arccosh": (1.2, 3), "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9),
           "arctanh": (-0.9, 0.9), "log": (0.2, 3), "log2": (0.2, 3), "log10": (0.2, 3),
           "sqrt": (0.2, 3), "rsqrt": (0.2, 3), "reciprocal": (0.5, 2), "log1p": (-0.5, 2),
           "tan": (-1.2, 1.2)}
unary = ["exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal",
         "square", "abs", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
         "tanh", "arcsinh", "arccosh", "arctanh", "erf", "erfc"]
rng = np.random.default_rng(0)
for name in unary:
    f = getattr(F, name)
    low, high = domains.get(name, (-2, 2))
    pts = rng.uniform(low, high, 50)
    x = lz.Variable(pts.copy())
    f(x).sum().backward()
    numeric = lz.utils.numerical_grad(lambda t: f(t).sum(), pts)[0]
    print(f"{name:11s} max |autodiff - numeric| = {np.abs(x.grad.data - numeric).max():.1e}")

# %% [markdown]
# ## Broadcasting and its gradient
# `a + b` with shapes (4, 1) and (3,) gives a (4, 3) table: `a` is copied along the
# columns and `b` along the rows. The copies' gradients are summed back (`sum_to`), so
# `a` receives 3 gradients per element and `b` receives 4.

# %%
a = lz.Variable(np.arange(4.0).reshape(4, 1))
b = lz.Variable(np.array([10.0, 20.0, 30.0]))
table = a * b
table.sum().backward()
print("a * b:\n", table.data)
print("grad of a (sum of b):", a.grad.data.ravel())
print("grad of b (sum of a):", b.grad.data)

# %% [markdown]
# ## Selections: maximum, clip, where
# Their gradients are masks. `clip` passes the gradient on the closed interval (as
# `torch.clamp`); `maximum` splits it half/half where both inputs are equal.

# %%
x = lz.Variable(np.linspace(-2, 2, 401))
fig, axes = plt.subplots(1, 3, figsize=(12, 3))
for ax, (title, fn) in zip(axes, [
        ("clip(x, -1, 1)", lambda v: F.clip(v, -1.0, 1.0)),
        ("maximum(x, 0.5 x)", lambda v: F.maximum(v, v * 0.5)),
        ("where(x > 0, x**2, -x)", lambda v: F.where(v.data > 0, v ** 2, -v))]):
    x.cleargrad()
    y = fn(x)
    y.sum().backward()
    ax.plot(x.data, y.data, label="value")
    ax.plot(x.data, x.grad.data, label="gradient")
    ax.set_title(title)
    ax.legend()
plt.show()
p, q = lz.Variable(np.array([1.0, 2.0])), lz.Variable(np.array([1.0, 0.0]))
F.maximum(p, q).sum().backward()
print("maximum at a tie: grads", p.grad.data, q.grad.data)

# %% [markdown]
# ## Reductions
# `axis` and `keepdims` follow NumPy. `var` and `std` default to `ddof=0` (NumPy's
# population variance); PyTorch's `torch.var` defaults to the sample variance, `ddof=1`.

# %%
data = np.random.default_rng(1).normal(2.0, 3.0, size=(5, 1000))
x = lz.Variable(data)
print("mean per row:", np.round(F.mean(x, axis=1).data, 2))
print("std per row, ddof=0:", np.round(F.std(x, axis=1).data, 3))
print("std per row, ddof=1:", np.round(F.std(x, axis=1, ddof=1).data, 3))
z = (x - F.mean(x, axis=1, keepdims=True)) / F.std(x, axis=1, keepdims=True)
print("standardised rows: mean", np.round(F.mean(z).item(), 6), " std",
      np.round(F.std(z, axis=1).data, 6))

# %% [markdown]
# ## logsumexp without overflow
# In float32, `exp` overflows above about 88.7. `logsumexp` shifts by the maximum first:
# log Σ exp(x) = m + log Σ exp(x − m), exact for any shift m.

# %%
shifts = np.linspace(0, 200, 201).astype(np.float32)
naive, stable = [], []
for s in shifts:
    v = np.array([s, s - 1.0, s - 2.0], np.float32)
    with np.errstate(over="ignore"):
        naive.append(np.log(np.exp(v).sum()))
    stable.append(F.logsumexp(v).item())
plt.plot(shifts, np.array(stable) - shifts, label="F.logsumexp(x) - max(x)")
plt.plot(shifts, np.array(naive) - shifts, "--", label="naive log(sum(exp(x))) - max(x)")
plt.xlabel("max(x)")
plt.ylim(0, 1)
plt.legend()
plt.title("The naive form overflows to inf past 88.7 (off the chart)")
plt.show()

# %% [markdown]
# ## Norms
# `norm(x, ord, axis)` takes `numpy.linalg.norm`'s arguments. The unit balls of a few
# p-norms in the plane:

# %%
theta = np.linspace(0, 2 * np.pi, 721)
directions = np.stack([np.cos(theta), np.sin(theta)], axis=1)
for ord in [1, 1.5, 2, 4, math.inf]:
    r = F.norm(directions, ord, axis=1).data
    pts = directions / r[:, None]              # scale every direction to norm 1
    plt.plot(pts[:, 0], pts[:, 1], label=f"ord={ord}")
plt.gca().set_aspect("equal")
plt.legend()
plt.title("{x : ||x||_p = 1}")
plt.show()

# %% [markdown]
# The 2-norm's gradient is x / ||x||. It is computed on x / max|x|, so even float32 values
# whose squares overflow work, and at x = 0 the gradient is 0 (as in PyTorch).

# %%
for values in ([3.0, 4.0], [3e20, 4e20], [0.0, 0.0]):
    w = lz.Variable(np.array(values, np.float32))
    n = F.norm(w)
    n.backward()
    print(f"norm({values}) = {n.item():.4g}, gradient {w.grad.data}")

# %% [markdown]
# ## Ties, zeros and selections
# `max` shares the gradient evenly among tied maxima (as `torch.amax`); `prod`'s gradient
# is the product of the other elements, exact at zeros; `topk` returns differentiable
# values and constant indices; `cumprod`'s gradient is also exact at zeros.

# %%
t = lz.Variable(np.array([2.0, 5.0, 5.0, 5.0]))
F.max(t).backward()
print("max grad, three-way tie:", t.grad.data)
for values in ([2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0]):
    z = lz.Variable(np.array(values))
    F.prod(z).backward()
    print(f"prod grad at {values}: {z.grad.data}")
z = lz.Variable(np.array([2.0, 0.0, 3.0]))
F.cumprod(z).sum().backward()
print("cumprod([2, 0, 3]) grad:", z.grad.data)        # d/dx of 2 + 2*x1 + 2*x1*3 at x1=0
scores = lz.Variable(np.array([0.1, 0.6, 0.05, 0.25]))
values, indices = F.topk(scores, 2)
values.sum().backward()
print("top-2:", values.data, indices.data, " grad:", scores.grad.data)
