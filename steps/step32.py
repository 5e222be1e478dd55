"""Step 32: parameters and modules.

Until now every weight was a loose Variable and the training loop had to list them all.
``nn.Module`` gathers them: assign a ``Parameter`` or another Module to an attribute and it
is registered under that name, in assignment order.  From there one call reaches them all:
``parameters()`` for the optimizer, ``state_dict()`` to save (with PyTorch's key names, so
a PyTorch checkpoint loads as it is), ``zero_grad()``, ``train()`` / ``eval()``.

``nn.Linear`` is such a module: ``weight`` (out, in) and ``bias`` (out,), initialised as
PyTorch does (uniform, scaled by 1 / sqrt(in)) from LeZero's seeded generator.
Run: python steps/step32.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn

lz.manual_seed(0)


# 1. A module of our own: two Linear layers and a learnt output scale.
class TwoLayerNet(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.hidden = nn.Linear(n_in, n_hidden)      # a child module
        self.out = nn.Linear(n_hidden, n_out)
        self.scale = nn.Parameter(np.ones(1, np.float32))   # a parameter of this module

    def forward(self, x):
        return self.out(F.sigmoid(self.hidden(x))) * self.scale


model = TwoLayerNet(1, 10, 1)
print(model)
print("\nnamed parameters (own first, then children in assignment order):")
for name, p in model.named_parameters():
    print(f"  {name:<14} {str(p.shape):<9} {p.dtype}")
print("state_dict keys:", list(model.state_dict()))

# 2. The state_dict round trip: a second model gets the first one's weights and then
#    computes the same function.  Arrays are copied in, so the two stay independent.
twin = TwoLayerNet(1, 10, 1)
x = lz.Variable(np.linspace(0, 1, 5, dtype=np.float32).reshape(5, 1))
print("\nbefore loading, outputs differ:", not np.allclose(model(x).data, twin(x).data))
result = twin.load_state_dict(model.state_dict())
print("after loading, outputs equal:  ", np.allclose(model(x).data, twin(x).data),
      "| missing/unexpected keys:", result.missing_keys, result.unexpected_keys)
try:
    twin.load_state_dict({**model.state_dict(), "hidden.weight": np.zeros((3, 1))})
except ValueError as e:
    print("a wrong shape is refused:", e)

# 3. Containers: Sequential chains modules; indices become key names, as in PyTorch.
seq = nn.Sequential(nn.Linear(1, 10), nn.Sigmoid(), nn.Linear(10, 1))
print("\nSequential keys:", list(seq.state_dict()))
print("parameters:", seq.num_parameters())

# 4. Fitting a noisy sine with the module: the update loop no longer names any weight.
rng = np.random.default_rng(0)
xs = rng.random((100, 1)).astype(np.float32)
ys = (np.sin(2 * np.pi * xs) + 0.1 * rng.standard_normal((100, 1))).astype(np.float32)
model = TwoLayerNet(1, 10, 1)
with lz.no_grad():        # start each hidden unit's step somewhere inside [0, 1]
    model.hidden.weight.data[...] = 6 * rng.standard_normal((10, 1))
    model.hidden.bias.data[...] = -model.hidden.weight.data[:, 0] * rng.random(10)
lr = 0.2
for step in range(3001):
    loss = F.mse_loss(model(xs), ys)
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data -= lr * p.grad.data
    if step % 1000 == 0:
        print(f"step {step:4d}  loss {loss.item():.4f}")

# 5. Forward hooks see every call: here, the hidden layer's mean activation.
seen = []
handle = model.hidden.register_forward_hook(lambda m, args, out: seen.append(
    float(F.sigmoid(out).data.mean())))
model(xs)
handle.remove()
print(f"\nmean hidden activation seen by a hook: {seen[0]:.3f}")
grid = np.linspace(0, 1, 6, dtype=np.float32).reshape(-1, 1)
with lz.no_grad():
    print("fit     ", np.round(model(grid).data[:, 0], 2))
print("sin 2pi ", np.round(np.sin(2 * np.pi * grid[:, 0]), 2))
