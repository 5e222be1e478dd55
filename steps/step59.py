"""Step 59: convert to INT8 and run on integers.

``convert`` replaces each prepared layer by an INT8 module.  A quantized Linear keeps
int8 weights; it subtracts the input's zero point, multiplies in integers and sums in
int32, adds an int32 bias, and moves the sum to the output's scale with an integer
multiplier and a shift (acc * m >> n, no float at run time), clamping to 0..255.  The
model is four times smaller; its accuracy barely moves; it saves and loads like any
state_dict and exports to ONNX as QuantizeLinear / DequantizeLinear pairs.
Run: python steps/step59.py
"""
import os
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero import quantization as Q
from lezero.data.datasets import Digits

lz.manual_seed(57)
train, test = Digits(train=True), Digits(train=False)
x, t = train.data.reshape(-1, 64), train.targets
xt, tt = test.data.reshape(-1, 64), test.targets
model = Q.QuantWrapper(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
opt = optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(15):
    for i in range(0, len(x), 128):
        loss = F.cross_entropy(model(x[i:i + 128]), t[i:i + 128])
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()

prepared = Q.prepare(Q.fuse(model))
Q.calibrate(prepared, [x[i:i + 128] for i in range(0, 512, 128)])
int8 = Q.convert(prepared)
print(int8)


def accuracy(m):
    with lz.no_grad():
        return float((m(xt).data.argmax(1) == tt).mean())


print(f"test accuracy: float32 {accuracy(model):.4f}, INT8 {accuracy(int8):.4f}")
print(f"size: {Q.model_size(model)} bytes float32, {Q.model_size(int8)} bytes INT8 "
      f"({Q.model_size(int8) / Q.model_size(model):.2f}x)")

# What one output of the first layer is, in integers.
layer = int8.module[0]
with lz.no_grad():
    q_in = int8.quant(xt[:1])
    q_out = layer(q_in)
sx, zx = q_in.q_scale(), q_in.q_zero_point()
attrs = layer._attrs((sx, zx))
c = int(q_out.data[0].argmax())                 # a channel the ReLU lets through
acc = int((q_in.data[0].astype(np.int64) - zx) @ layer.weight[c].astype(np.int64)
          + attrs["bias_q"][c])
m, shift = int(attrs["m"][c]), int(attrs["shift"][c])
by_hand = min(max(((acc * m + (1 << (30 - shift))) >> (31 - shift)) + int(layer.zero_point),
                  0), 255)
print(f"channel {c}: int32 sum {acc}, multiplier {m} >> {31 - shift} "
      f"(= {m * 2.0 ** (shift - 31):.3e}), output {by_hand}; the layer gave "
      f"{int(q_out.data[0, c])}")

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "int8.npz")
    lz.save(int8.state_dict(), path)
    again = Q.load_quantized(Q.fuse(model), path)
    print("saved and loaded:", os.path.getsize(path), "bytes on disk, same outputs:",
          np.array_equal(accuracy(again), accuracy(int8)))
