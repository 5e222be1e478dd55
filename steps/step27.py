"""Step 27: Numba kernels for the convolution's data movement.

im2col with NumPy slicing makes k*k strided copies of the (padded) input; its adjoint
col2im adds k*k strided slices back.  Both are pure data movement, and in Python every
copy is a separate pass over memory.  ``lezero.kernels.im2col`` does the same work in one
compiled loop per (sample, channel) plane: padding is handled by index arithmetic (no
padded copy), zero runs are written without loads, and the in-range part of each row is a
contiguous copy that LLVM vectorises.  Every kernel keeps its NumPy reference beside it;
``lz.Config.use_numba = False`` switches the kernels off, and the tests compare the two.

Parallelism sits one level up: a convolution's batch is split into one part per thread
and each part runs serial kernels and single-threaded BLAS (``lz.Config.conv_threads``).
One fork and one join per product instead of a synchronisation inside every GEMM.
Run: python steps/step27.py
"""
import os
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero.kernels import im2col as kernels

rng = np.random.default_rng(0)


def best_ms(fn, repeat=5):
    fn()                                   # the first call may compile (cached on disk)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


# 1. The kernel and its reference fill the same matrix.
x = rng.standard_normal((8, 32, 1, 32, 32)).astype(np.float32)       # (N, C, D, H, W)
geo = (1, 3, 3) + (1, 1, 1) + (0, 1, 1) + (1, 1, 1) + (1, 32, 32)    # k, s, pad, d, out
col_ref = kernels.im2col_ref(x, np.empty((32 * 9, 8, 1024), np.float32), geo)
col_nb = kernels.im2col(x, np.empty((32 * 9, 8, 1024), np.float32), geo, use_numba=True)
print("im2col: Numba kernel == NumPy reference:", np.array_equal(col_ref, col_nb))
g_ref = kernels.col2im_ref(col_ref, np.zeros_like(x), geo)
g_nb = kernels.col2im(col_ref, np.zeros_like(x), geo, use_numba=True)
print(f"col2im: max difference {np.abs(g_ref - g_nb).max():.1e} (sums in another order)")

t_ref = best_ms(lambda: kernels.im2col_ref(x, np.empty((288, 8, 1024), np.float32), geo))
t_nb = best_ms(lambda: kernels.im2col(x, np.empty((288, 8, 1024), np.float32), geo))
print(f"im2col of (8, 32, 32, 32), 3x3: NumPy {t_ref:.1f} ms, Numba {t_nb:.1f} ms "
      f"({t_ref / t_nb:.1f}x)")

# 2. A whole training-style call, kernels off and on.
xv = lz.Variable(rng.standard_normal((16, 32, 32, 32)).astype(np.float32))
wv = lz.Parameter((rng.standard_normal((32, 32, 3, 3)) * 0.06).astype(np.float32))


def fwd_bwd():
    xv.cleargrad(), wv.cleargrad()
    F.conv2d(xv, wv, padding=1, algo="im2col").sum().backward()


with lz.using_config("use_numba", False):
    t_off = best_ms(fwd_bwd, 3)
    grads_off = (xv.grad.data.copy(), wv.grad.data.copy())
t_on = best_ms(fwd_bwd, 3)
same = all(np.allclose(a, b, rtol=1e-4, atol=1e-3) for a, b in
           zip(grads_off, (xv.grad.data, wv.grad.data)))
print(f"conv2d im2col forward+backward (16, 32, 32, 32): kernels off {t_off:.1f} ms, "
      f"on {t_on:.1f} ms; same gradients: {same}")

# 3. Batch-split threads: one part per thread.  With one part, BLAS and the kernels
#    use their own thread pools instead (synchronising inside every GEMM and kernel).
with lz.using_config("conv_threads", 1):
    y1 = F.conv2d(xv, wv, padding=1).data
    t1 = best_ms(lambda: F.conv2d(xv, wv, padding=1), 3)
with lz.using_config("conv_threads", 2):
    y2 = F.conv2d(xv, wv, padding=1).data
    t2 = best_ms(lambda: F.conv2d(xv, wv, padding=1), 3)
print(f"forward, batch in one part {t1:.1f} ms, split in two {t2:.1f} ms "
      f"(this machine has {os.cpu_count()} cores); same outputs: "
      f"{np.allclose(y1, y2, rtol=1e-5, atol=1e-5)}")
