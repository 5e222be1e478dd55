"""Step 57: observing values -- from a range of real numbers to a scale and zero point.

INT8 stores a real value r as an integer q with r ~ scale * (q - zero_point).  An
*observer* watches the values a tensor takes and chooses the two numbers: MinMax maps
[min, max] (stretched to include 0, so that 0 is exact) onto 0..255; a moving average
forgets old batches; a histogram can cut a few outliers that would waste the grid.
``quantization.prepare`` puts an observer on the output of every layer; running a few
batches through it (``calibrate``) is all post-training quantization needs.
Run: python steps/step57.py
"""
import numpy as np

import lezero as lz
from lezero import nn
from lezero import quantization as Q

rng = np.random.default_rng(55)
x = rng.standard_normal(10000).astype(np.float32)
x[:2] = [30.0, -25.0]                       # two outliers

# 1. Three observers of the same values.
for obs in (Q.MinMaxObserver(), Q.HistogramObserver(method="percentile", percentile=99.9),
            Q.HistogramObserver(method="entropy")):
    obs(x)
    scale, zp = obs.calculate_qparams()
    q = Q.fake_quantize(x, scale, zp, 0, 255).data        # round to the grid and back
    err = np.sqrt(np.mean((q - x)[2:] ** 2))
    print(f"{type(obs).__name__:<20}{getattr(obs, 'method', ''):<11} scale {scale[0]:.4f} "
          f"zero point {zp[0]:>3}  rms error on the bulk {err:.4f}")

# 2. Symmetric per-channel parameters for weights: one scale per output channel.
w = rng.standard_normal((4, 8)).astype(np.float32) * np.array([[0.1], [1], [3], [0.01]],
                                                               np.float32)
wobs = Q.PerChannelMinMaxObserver(dtype="qint8", qscheme="per_channel_symmetric")
wobs(w)
print("per-channel weight scales:", np.round(wobs.calculate_qparams()[0], 5))

# 3. A model: prepare puts observers on the outputs, calibrate feeds them.
lz.manual_seed(55)
model = Q.QuantWrapper(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))).eval()
prepared = Q.prepare(Q.fuse(model))
Q.calibrate(prepared, [rng.standard_normal((32, 8)).astype(np.float32) for _ in range(4)])
for name, m in prepared.named_modules():
    if isinstance(m, Q.ObserverBase):
        s, z = m.calculate_qparams()
        print(f"{name:<36} range [{float(m.min_val):+.3f}, {float(m.max_val):+.3f}] "
              f"-> scale {s[0]:.5f}, zero point {z[0]}")
