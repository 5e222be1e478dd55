"""Step 58: fake quantization and quantization-aware training.

Fake quantization rounds a float tensor to the INT8 grid and back, still in float:
y = (clamp(round(x / s) + z, 0, 255) - z) * s.  The rounding has no useful derivative,
so the backward pass lets the gradient straight through where x lies inside the grid's
range and stops it outside (the clipped straight-through estimator).  Training with it
(``prepare_qat``: fake-quantized weights and outputs) teaches the weights to live with
the rounding the INT8 model will do.  LSQ goes one step further and learns the scale.
Run: python steps/step58.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero import quantization as Q

# 1. Values and the straight-through gradient.
x = lz.Variable(np.array([-0.3, 0.04, 0.26, 1.1, 2.9], np.float32))
y = Q.fake_quantize(x, np.float32(0.1), 3, 0, 25)        # range [-0.3, 2.2]
y.backward(grad=np.ones(5, np.float32))
print("x        ", x.data)
print("fake q(x)", np.round(y.data, 3))
print("gradient ", x.grad.data, "(zero where x fell outside the range)")

# 2. Quantization-aware training of a small classifier on the spiral data.
lz.manual_seed(56)
from lezero.data.datasets import get_spiral
xs, ts = get_spiral(train=True)
model = Q.QuantWrapper(nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32),
                                     nn.ReLU(), nn.Linear(32, 3)))
qat = Q.prepare_qat(Q.fuse(model))
print("after prepare_qat:", type(qat.module[0]).__name__, "with",
      type(qat.module[0].weight_fake_quant).__name__, "on its weight")
opt = optim.Adam(qat.parameters(), lr=0.03)
for step in range(301):
    loss = F.cross_entropy(qat(xs), ts)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"step {step:3d}  loss {loss.item():.3f}")
qat.eval()
Q.disable_observer(qat)
with lz.no_grad():
    acc = float((qat(xs).data.argmax(1) == ts).mean())
print(f"fake-quantized training accuracy {acc:.3f}")
layer = qat.module[2]
w = layer.weight_fake_quant(layer.weight).data
steps = np.round(w / layer.weight_fake_quant.scale[:, None], 4)[:2, :6]
print("second layer's fake-quantized weights, in steps of their channel's scale (whole\n"
      "numbers; -128 and 127 are clipped: the moving-average observer lags weights that\n"
      "grew fast under lr 0.03):\n", steps)
