# %% [markdown]
# # 16. INT8 quantization: observe, fake-quantize, convert
#
# This notebook follows `steps/step57.py` to `steps/step59.py`. We train LeNet-5 on
# scikit-learn's digits, quantize it to INT8 two ways -- post-training calibration (PTQ)
# and quantization-aware training (QAT) -- and compare accuracy and size; then we ask
# which layers suffer most (the per-layer sensitivity report) and keep the worst in
# float; finally we look at where the INT8 kernels stand against float32 on this CPU.

# %%
import copy
import time

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero import quantization as Q
from lezero.data.datasets import Digits
from lezero.nn.models import LeNet5
# %matplotlib inline

import numba
from threadpoolctl import threadpool_limits
threadpool_limits(1)
numba.set_num_threads(1)
lz.manual_seed(17)

train, test = Digits(train=True), Digits(train=False)
x, t = train.data[:, None].copy(), train.targets
xt, tt = test.data[:, None].copy(), test.targets


def fit(model, epochs, lr, on_epoch=None):
    opt = optim.Adam(model.parameters(), lr=lr)
    for epoch in range(epochs):
        if on_epoch:
            on_epoch(epoch, model)
        model.train()
        order = np.random.default_rng(epoch).permutation(len(x))
        for i in range(0, len(x), 64):
            idx = order[i:i + 64]
            loss = F.cross_entropy(model(x[idx]), t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


def accuracy(model):
    model.eval()
    with lz.no_grad():
        return float((model(xt).data.argmax(1) == tt).mean())


float_model = fit(LeNet5(10, 1, 8), 12, 1e-2)
print(f"float32 test accuracy {accuracy(float_model):.4f}")

# %% [markdown]
# ## Post-training quantization
# `QuantWrapper` marks where float becomes INT8 and back; `fuse` folds each conv/linear
# with the ReLU after it; `prepare` puts observers on the outputs; `calibrate` runs a
# few batches; `convert` swaps every layer for its INT8 module. `F.flatten` inside
# LeNet-5's forward is a view, which keeps a quantized tensor's scale and zero point,
# so the zoo model needs no change.

# %%
prepared = Q.prepare(Q.fuse(Q.QuantWrapper(copy.deepcopy(float_model))))
calib = [x[i:i + 64] for i in range(0, 512, 64)]
Q.calibrate(prepared, calib)
ptq = Q.convert(prepared)
print(ptq.module.features)

# %% [markdown]
# ## Quantization-aware training
# `prepare_qat` gives every layer a fake-quantized weight and a fake-quantize module on
# its output; three epochs of fine-tuning at a tenth of the learning rate let the
# weights adapt to the INT8 grid. LSQ also learns the scales.

# %%
def qat(qconfig):
    model = Q.prepare_qat(Q.fuse(Q.QuantWrapper(copy.deepcopy(float_model)).train(),
                                 qat=True), qconfig=qconfig)
    fit(model, 3, 1e-3)
    return Q.convert(Q.disable_observer(model.eval()))


rows = [("float32", float_model), ("PTQ (MinMax)", ptq),
        ("PTQ (histogram)", Q.convert(Q.calibrate(Q.prepare(
            Q.fuse(Q.QuantWrapper(copy.deepcopy(float_model))),
            qconfig=Q.histogram_qconfig), calib))),
        ("QAT", qat(Q.default_qat_qconfig))]
base = Q.model_size(float_model)
print(f"{'model':<18}{'accuracy':>10}{'bytes':>9}{'size':>7}")
for name, m in rows:
    print(f"{name:<18}{accuracy(m) * 100:>9.2f}%{Q.model_size(m):>9}"
          f"{Q.model_size(m) / base:>7.3f}")

# %% [markdown]
# The test set has 359 images: one image is 0.28 points. The size ratio is above 0.25
# because each of LeNet-5's 236 output channels keeps a float32 bias, a float32 scale
# and an int8 zero point beside its int8 weights (ResNet-18's ratio is 0.251).
#
# ## Which layers suffer: the sensitivity report
# For every observed layer, its float output against the same layer computed the INT8
# way (input, weight and output fake-quantized): SQNR in dB (about 6 dB per bit) and
# the cosine similarity, with the observed output range.

# %%
report = Q.sensitivity_report(prepared, calib)
print(report)
fig, ax = plt.subplots(figsize=(7, 3))
report.plot(ax)
plt.tight_layout()
plt.show()

# %% [markdown]
# `keep_most_sensitive` marks the layer of lowest SQNR to stay float; `convert` turns
# it into a `FloatFallback` (dequantize, float layer, quantize) and the rest stays INT8.

# %%
kept = Q.convert(Q.keep_most_sensitive(copy.deepcopy(prepared), report, 1))
name = report.most_sensitive(1)[0]
print(f"kept {name} in float: {type(dict(kept.named_modules())[name]).__name__}, "
      f"accuracy {accuracy(kept) * 100:.2f}%")

# %% [markdown]
# ## Speed on this CPU
# The integer products run in Numba: int16 operands (zero points subtracted), dot
# products that LLVM vectorises into `vpdpwssd`, int32 sums, then a fixed-point
# requantization pass. Against OpenBLAS's float32 GEMM on the same shapes: about par
# for large K, far slower for K = 27 (a first convolution), where each dot product is
# too short to fill the vector loop. NumPy itself has no int8 BLAS. onnxruntime's
# hand-written VNNI kernels (`vpdpbusd`, four times the int16 throughput) run the same
# QDQ model several times faster (`benchmarks/bench_quant.py`, docs/quantization.md).

# %%
from lezero.quantization import kernels as K
from lezero.quantization.fixed_point import quantize_multiplier


def best(fn, repeat=5):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


rng = np.random.default_rng(0)
shapes = [(1024, 27, 64), (256, 144, 64), (256, 576, 64), (64, 2304, 256)]
int8_rate, f32_rate = [], []
for m, k, n in shapes:
    a = rng.integers(-128, 128, (m, k)).astype(np.int16)
    b = rng.integers(-127, 128, (n, k)).astype(np.int16)
    bias, (mult, shift) = np.zeros(n, np.int32), quantize_multiplier(np.full(n, 1e-4))
    af, bf = a.astype(np.float32), b.astype(np.float32)
    ops = 2 * m * k * n
    int8_rate.append(ops / best(lambda: K.gemm_requant(a, b, bias, mult, shift, 0, 0, 255,
                                                       np.uint8)) / 1e9)
    f32_rate.append(ops / best(lambda: af @ bf.T) / 1e9)
labels = [f"K={k}" for _, k, _ in shapes]
pos = np.arange(len(shapes))
fig, ax = plt.subplots(figsize=(6, 3))
ax.bar(pos - 0.2, int8_rate, 0.4, label="INT8 (Numba)")
ax.bar(pos + 0.2, f32_rate, 0.4, label="float32 (OpenBLAS)")
ax.set_xticks(pos)
ax.set_xticklabels(labels)
ax.set_ylabel("Gop/s, one thread")
ax.legend()
plt.tight_layout()
plt.show()
