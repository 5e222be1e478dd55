"""Step 15: double backprop with ``lz.grad``.

``lz.grad(outputs, inputs, create_graph=True)`` returns gradients as graph nodes, which
can appear in a new loss.  Two classic uses:
  * Hessian-vector products without forming the Hessian;
  * a gradient penalty (as in WGAN-GP) that trains weights through d(output)/d(input).
Run: python steps/step15.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

rng = np.random.default_rng(0)
w = lz.Variable(rng.standard_normal(3))
x = rng.standard_normal((5, 3))
loss = (F.tanh(x @ w) ** 2).sum()
(g,) = lz.grad(loss, w, create_graph=True)
v = np.array([1.0, 0.0, 0.0])
(hv,) = lz.grad((g * v).sum(), w)
eps = 1e-6
wp, wm = lz.Variable(w.data + eps * v), lz.Variable(w.data - eps * v)
numeric = (lz.grad((F.tanh(x @ wp) ** 2).sum(), wp)[0].data
           - lz.grad((F.tanh(x @ wm) ** 2).sum(), wm)[0].data) / (2 * eps)
print("Hessian-vector product :", np.round(hv.data, 6))
print("finite differences     :", np.round(numeric, 6))

# Gradient penalty: push ||d f / d x|| towards 1 for each sample.
W1 = lz.Variable(rng.standard_normal((3, 8)) * 0.5)
W2 = lz.Variable(rng.standard_normal((8, 1)) * 0.5)
xs = lz.Variable(rng.standard_normal((16, 3)))
for step in range(101):
    out = (F.tanh(xs @ W1) @ W2).sum()
    (gx,) = lz.grad(out, xs, create_graph=True)
    penalty = ((((gx * gx).sum(axis=1)) ** 0.5 - 1) ** 2).sum() / 16
    W1.cleargrad()
    W2.cleargrad()
    penalty.backward()
    W1.data -= 0.1 * W1.grad.data
    W2.data -= 0.1 * W2.grad.data
    if step % 25 == 0:
        print(f"step {step:3d}: gradient penalty {penalty.item():.5f}")
