"""Step 61: PyTorch habits, and what LeZero does with them.

Someone coming from PyTorch types ``dim=``, ``x.view(...)``, ``torch.tensor(...)``,
``model.double()`` and ``torch.no_grad()`` without thinking.  LeZero takes NumPy's names
(``axis=``) and DeZero's defaults, and accepts the PyTorch spellings as well: every
registered operator takes ``dim=``/``keepdim=``, Variables have ``view``, ``permute``,
``clone`` and ``to``, and ``lz.tensor``/``lz.zeros``/``lz.randn`` build Variables the way
torch builds tensors (``requires_grad=False`` and float32 unless asked).  Where the two
differ on purpose (``x.size`` is DeZero's element count, a float64 array given to a
float32 model is cast with a warning), docs/pytorch_manners.md says why.
Run: python steps/step61.py
"""
import warnings

import numpy as np

import lezero as lz
import lezero.nn.functional as F          # the same module as lezero.functions
from lezero import nn, optim

lz.manual_seed(61)

# 1. Constructors as torch has them: constants by default, float32 by default.
x = lz.randn(2, 3)
w = lz.ones(3, 4, requires_grad=True)
print("lz.randn(2, 3):", x.dtype, x.shape, "requires_grad", x.requires_grad)
print("lz.arange(5):", lz.arange(5).tolist(),
      " lz.linspace(0, 1, 3):", lz.linspace(0, 1, 3).tolist())

# 2. dim= and keepdim= on any operator; NumPy's axis= still works.
s1 = x.sum(dim=1, keepdim=True)
s2 = F.sum(x, axis=1, keepdims=True)
print("x.sum(dim=1, keepdim=True) equals F.sum(x, axis=1, keepdims=True):",
      bool(np.array_equal(s1.data, s2.data)))
print("F.softmax(x, dim=1) rows sum to", np.round(F.softmax(x, dim=1).data.sum(1), 6).tolist())

# 3. Tensor methods: view, permute, unsqueeze, clone, clamp, numel, to(dtype).
y = (x @ w).view(2, 2, 2).permute(2, 0, 1).clamp(-1.0, 1.0)
print("view/permute/clamp:", y.shape, " numel", y.numel(), " dim", y.dim())
y.sum().backward()
print("gradient reached w through them:", w.grad.shape, "sum", float(w.grad.data.sum()))
print("x.to('float64').dtype:", x.to("float64").dtype, " x.clone() is a new Variable:",
      x.clone() is not x)

# 4. Sorting and gathering with torch's names.
values, indices = F.sort(lz.tensor([3.0, 1.0, 2.0]), descending=True)
print("F.sort(..., descending=True):", values.tolist(), indices.tolist())
print("F.cat is F.concatenate:", F.cat([x, x], dim=0).shape)

# 5. Modules: .double(), .float(), requires_grad_(); a float64 array into a float32 model
#    is cast to the parameters' dtype, with one warning naming the layer.
model = nn.Linear(3, 2)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = model(np.random.default_rng(0).random((4, 3)))        # float64 data
print("float32 model on float64 data ->", out.dtype, "|", str(caught[0].message)[:60], "...")
print("model.double() ->", model.double().weight.dtype, "; back with .float():",
      model.float().weight.dtype)

# 6. Grad modes: set_grad_enabled and inference_mode.
with lz.set_grad_enabled(False):
    z = model(x)
print("under set_grad_enabled(False) the output requires grad:", z.requires_grad)
with lz.inference_mode():
    print("inference_mode is grad enabled?", lz.is_grad_enabled())

# 7. optim.LBFGS with a closure, as torch.optim.LBFGS: a least-squares fit.
A = lz.tensor(np.random.default_rng(1).random((20, 3)))
b = A @ lz.tensor([1.0, -2.0, 0.5])
p = lz.zeros(3, requires_grad=True)
opt = optim.LBFGS([p], line_search_fn="strong_wolfe")


def closure():
    opt.zero_grad()
    loss = ((A @ p - b) ** 2).mean()
    loss.backward()
    return loss


for _ in range(3):
    loss = opt.step(closure)
print("LBFGS recovered", np.round(p.data, 4).tolist(), "loss", f"{float(loss.data):.2e}")
