"""Step 28: Winograd convolution, F(2x2, 3x3) and F(4x4, 3x3).

Two outputs of a 3-tap filter ``g`` over four inputs ``d`` take 6 multiplications the
direct way.  Winograd's minimal filtering algorithm F(2, 3) needs 4: transform the data
(``BT d``, additions only), transform the filter (``G g``, once per filter), multiply
elementwise, and transform back (``AT``):

    y = AT [ (G g) * (BT d) ]

The matrices come from polynomial multiplication: evaluate at a few points (here 0, 1,
-1 and infinity), multiply the values, interpolate back (Toom-Cook), then transpose the
convolution algorithm into a correlation.  Nesting it gives 2-D tiles,
``Y = AT [(G g G^T) * (BT d BT^T)] AT^T``: a 2x2 output tile costs 16 multiplications
instead of 36, and F(4x4, 3x3) a 4x4 tile 36 instead of 144.  Over a whole layer the
elementwise products become one GEMM per tile position (alpha^2 = 16 or 36 of them),
contracting the channels; the gradients are the same transforms transposed.  The price:
more rounding error (larger constants in the transforms), growing with the tile size.
Run: python steps/step28.py
"""
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero.kernels.winograd import winograd_matrices

np.set_printoptions(precision=3, suppress=True)
rng = np.random.default_rng(0)

# 1. F(2, 3) in one dimension.
AT, G, BT = winograd_matrices(2)
print("BT =\n", BT, "\nG =\n", G, "\nAT =\n", AT)
d, g = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, -1.0, 2.0])
direct = np.array([d[0:3] @ g, d[1:4] @ g])
wino = AT @ ((G @ g) * (BT @ d))
print(f"two outputs directly {direct} (6 multiplications), by Winograd {wino} (4)")

# 2. Multiplications per output, and the error in float32, for each tile size.
x = rng.standard_normal((4, 16, 20, 20)).astype(np.float32)
w = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
ref = F.conv2d(x.astype(np.float64), w.astype(np.float64), padding=1, algo="im2col").data
for m in (2, 4):
    alpha = m + 2
    y = F.conv2d(x, w, padding=1, algo=f"winograd_{m}x{m}").data
    err = np.abs(y - ref).max() / np.abs(ref).max()
    print(f"F({m}x{m},3x3): {alpha * alpha} multiplies per {m * m} outputs = "
          f"{alpha * alpha / (m * m):.2f} per output (direct: 9); float32 error {err:.1e}")
y = F.conv2d(x, w, padding=1, algo="im2col").data
print(f"im2col (direct products):   float32 error {np.abs(y - ref).max() / np.abs(ref).max():.1e}")

# 3. Gradients: transposed transforms, checked against central differences.
ok = lz.utils.gradient_check(lambda a, k: F.conv2d(a, k, padding=1, algo="winograd_4x4"),
                             rng.standard_normal((1, 2, 6, 5)), rng.standard_normal((3, 2, 3, 3)))
print("F(4x4,3x3) gradients match central differences:", ok)

# 4. A training step's three products on a 3x3 layer, per algorithm.
xv = lz.Variable(rng.standard_normal((16, 32, 32, 32)).astype(np.float32))
wv = lz.Parameter((rng.standard_normal((32, 32, 3, 3)) / 17).astype(np.float32))


def step(algo):
    xv.cleargrad(), wv.cleargrad()
    F.conv2d(xv, wv, padding=1, algo=algo).sum().backward()


for algo in ("im2col", "winograd_2x2", "winograd_4x4"):
    step(algo)
    t0 = time.perf_counter()
    for _ in range(3):
        step(algo)
    print(f"forward+backward (16, 32, 32, 32), 3x3, {algo:<13}: "
          f"{(time.perf_counter() - t0) / 3 * 1e3:.1f} ms")
