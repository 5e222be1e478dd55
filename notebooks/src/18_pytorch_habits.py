# %% [markdown]
# # 18. PyTorch habits in LeZero
#
# This notebook follows `steps/step61.py`. LeZero speaks NumPy's names (`axis=`) and keeps
# DeZero's defaults, and it also accepts what a PyTorch user types without thinking:
# `dim=` on every operator, `x.view`/`permute`/`clone`/`to`, `lz.tensor`/`lz.randn`,
# `model.double()`, `lz.set_grad_enabled`, `optim.LBFGS`, `F.sort`, `F.grid_sample`.
# Each one is checked against PyTorch in the tests; `docs/pytorch_manners.md` lists them
# and every intended difference.

# %%
import warnings

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.nn.functional as F
from lezero import nn, optim
# %matplotlib inline
_ = lz.manual_seed(18)

# %% [markdown]
# ## Constructors and `dim=`
# `lz.tensor` and friends build constants in float32 unless told otherwise, as torch does;
# `lz.Variable` keeps DeZero's `requires_grad=True`. Every registered operator accepts
# `dim=`/`keepdim=` beside NumPy's `axis=`/`keepdims=`.

# %%
x = lz.randn(3, 5)
print(x.dtype, x.requires_grad, lz.Variable(np.ones(2)).requires_grad)
print(np.array_equal(x.sum(dim=1, keepdim=True).data, F.sum(x, axis=1, keepdims=True).data))
print(F.softmax(x, dim=1).data.sum(axis=1))
try:
    F.sum(x, axis=0, dim=1)
except TypeError as e:
    print("both spellings:", e)

# %% [markdown]
# ## A float64 array into a float32 model
# NumPy's default dtype is float64. PyTorch raises on the mismatch; LeZero casts the input
# to the parameters' dtype, once warning which layer did it, so float32 weights never get
# float64 gradients.

# %%
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = model(np.random.default_rng(0).random((4, 5)))
print(out.dtype, "|", caught[0].message)
print(model.double()[0].weight.dtype, model.float()[0].weight.dtype)

# %% [markdown]
# ## `F.grid_sample`: rotating an image with a differentiable sampler
# `F.affine_grid`-style grids are plain arrays here: we build the rotated coordinates by
# hand, sample a digit with `grid_sample`, and take the gradient with respect to the
# angle through the grid. The sampler matches `torch.nn.functional.grid_sample` for all
# modes and paddings (tests/functions/pooling/test_grid_sample.py).

# %%
from sklearn.datasets import load_digits
digit = load_digits().images[0].astype(np.float32)[None, None] / 16.0   # (1, 1, 8, 8)
ys, xs = np.meshgrid(np.linspace(-1, 1, 32), np.linspace(-1, 1, 32), indexing="ij")
theta = lz.tensor(np.float32(0.5), requires_grad=True)
c, s = F.cos(theta), F.sin(theta)
gx = c * lz.tensor(xs.astype(np.float32)) - s * lz.tensor(ys.astype(np.float32))
gy = s * lz.tensor(xs.astype(np.float32)) + c * lz.tensor(ys.astype(np.float32))
grid = F.stack([gx, gy], axis=-1)[None]                                   # (1, 32, 32, 2)
rotated = F.grid_sample(lz.tensor(digit), grid, align_corners=True)
rotated.sum().backward()
print("d(sum of the rotated image)/d(angle) =", float(theta.grad.data))

fig, axes = plt.subplots(1, 2, figsize=(5, 2.5))
axes[0].imshow(digit[0, 0], cmap="gray"); axes[0].set_title("digit (8x8)")
axes[1].imshow(rotated.data[0, 0], cmap="gray"); axes[1].set_title("rotated, 32x32")
for a in axes:
    a.axis("off")
plt.show()

# %% [markdown]
# ## `optim.LBFGS` with a closure
# The same closure protocol as `torch.optim.LBFGS`; with the strong-Wolfe line search a
# least-squares fit converges in a handful of steps. The plot shows the loss per
# closure evaluation.

# %%
rng = np.random.default_rng(1)
A = lz.tensor(rng.random((40, 4)))
b = A @ lz.tensor([1.0, -2.0, 0.5, 3.0])
p = lz.zeros(4, requires_grad=True)
opt = optim.LBFGS([p], line_search_fn="strong_wolfe")
losses = []


def closure():
    opt.zero_grad()
    loss = ((A @ p - b) ** 2).mean()
    loss.backward()
    losses.append(float(loss.data))
    return loss


for _ in range(3):
    opt.step(closure)
print("recovered", np.round(p.data, 4))
plt.figure(figsize=(4, 2.5))
plt.semilogy(losses, marker=".")
plt.xlabel("closure call"); plt.ylabel("loss"); plt.title("LBFGS, strong Wolfe")
plt.show()
