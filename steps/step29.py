"""Step 29: FFT convolution, choosing an algorithm, and autotuning.

Convolution in space is multiplication in frequency.  With ``X = rfft(x)`` and
``W = rfft(w)`` (both zero-padded to the window extent), a correlation is
``irfft(X * conj(W))``; summing over input channels becomes one complex matrix product
per frequency.  Its cost hardly depends on the kernel size, so it wins for large kernels,
where im2col copies the input k*k times.

No algorithm wins everywhere, so ``algo="auto"`` chooses per layer and per product
(forward, grad_input, grad_weight):

* by default with a cost model (predicted GEMM, memory and FFT time per algorithm),
* with ``lz.Config.conv_autotune = True`` by timing every candidate once per *shape
  bucket* (batch and image sizes rounded up to half octaves) and remembering the winner
  in a JSON file (``$LEZERO_CONV_CACHE``, default ``~/.cache/lezero/conv_autotune.json``).

``F.conv_explain`` shows the whole decision: predicted and measured time, workspace,
error against a float64 reference, the choice and the reason.
Run: python steps/step29.py
"""
import json
import os
import tempfile
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero.functions.conv import autotune

rng = np.random.default_rng(0)

# 1. FFT against im2col as the kernel grows.
x = rng.standard_normal((4, 8, 48, 48)).astype(np.float32)
for k in (3, 7, 15):
    w = (rng.standard_normal((8, 8, k, k)) / (8 * k)).astype(np.float32)
    times = {}
    for algo in ("im2col", "fft"):
        F.conv2d(x, w, padding=k // 2, algo=algo)
        t0 = time.perf_counter()
        y = F.conv2d(x, w, padding=k // 2, algo=algo).data
        times[algo] = (time.perf_counter() - t0) * 1e3
        if algo == "im2col":
            ref = y
    err = np.abs(y - ref).max() / np.abs(ref).max()
    print(f"{k:>2}x{k:<2} kernel: im2col {times['im2col']:6.1f} ms, fft {times['fft']:6.1f} ms, "
          f"relative difference {err:.1e}")

# 2. What the cost model would pick, and why: one layer, all algorithms.
F.conv_explain((8, 32, 32, 32), (32, 32, 3, 3), padding=1, repeat=2)

# 3. Autotuning with a private cache file.
with tempfile.TemporaryDirectory() as tmp:
    os.environ[autotune.ENV_FILE] = os.path.join(tmp, "conv.json")
    autotune.clear_memory()
    w = lz.Parameter((rng.standard_normal((16, 8, 5, 5)) / 14).astype(np.float32))
    with lz.using_config("conv_autotune", True):
        for batch in (6, 5, 8, 7):           # 5 and 6 share the bucket 6; 7 and 8 share 8
            xv = lz.Variable(rng.standard_normal((batch, 8, 28, 28)).astype(np.float32))
            t0 = time.perf_counter()
            F.conv2d(xv, w, padding=2).sum().backward()
            entries = json.load(open(os.environ[autotune.ENV_FILE]))["entries"]
            print(f"batch {batch:>2}: step took {(time.perf_counter() - t0) * 1e3:7.1f} ms, "
                  f"cache holds {len(entries)} tuned products")
    for key, entry in sorted(entries.items())[:3]:
        print(f"  {key}\n    -> {entry['algo']}  (ms: {entry['ms']})")
    del os.environ[autotune.ENV_FILE]
    autotune.clear_memory()
