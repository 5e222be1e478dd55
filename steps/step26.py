"""Step 26: convolution as a matrix product (im2col), and its gradients.

A 2-D convolution slides a small filter over an image and takes a dot product at every
position:

    y[n, o, i, j] = b[o] + sum_{c, a, b} w[o, c, a, b] * x[n, c, i*s + a - p, j*s + b - p]

Copying every window of ``x`` into a column of a matrix ("im2col", ``F.unfold``) turns
this into one matrix product ``W (Cout, C*k*k) @ col (C*k*k, positions)``: all the
arithmetic happens in a GEMM, the fastest routine a CPU has.  The gradient with respect
to ``x`` adds the columns back where they came from ("col2im", ``F.fold``): a transposed
convolution, which is exactly what ``F.conv_transpose2d`` computes.

Below: im2col by hand against ``F.unfold``; convolution as unfold + matmul against
``F.conv2d`` and a plain loop; the three gradients checked by central differences; and
the transposed convolution as the gradient of the convolution.
Run: python steps/step26.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

rng = np.random.default_rng(0)

# 1. im2col by hand: every 3x3 window of a 4x5 image becomes a column.
img = np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5)
cols = np.stack([img[0, 0, i:i + 3, j:j + 3].ravel() for i in range(2) for j in range(3)], 1)
print("image:\n", img[0, 0])
print("im2col by hand, shape", cols.shape, "first column:", cols[:, 0].tolist())
unfolded = F.unfold(img, kernel_size=3).data[0]
print("F.unfold gives the same matrix:", np.array_equal(unfolded, cols))

# 2. Convolution = unfold + matmul, against F.conv2d and against the definition.
x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
b = rng.standard_normal(4).astype(np.float32)
col = F.unfold(x, 3, padding=1, stride=2).data                      # (N, 27, L)
y_gemm = (w.reshape(4, -1) @ col + b[:, None]).reshape(2, 4, 3, 4)
y = F.conv2d(x, w, b, padding=1, stride=2, algo="im2col").data


def conv_loop(x, w, b, stride, pad):
    """The definition, one output at a time (slow, obviously right)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = xp.shape
    k = w.shape[2]
    ho, wo = (h - k) // stride + 1, (wd - k) // stride + 1
    out = np.zeros((n, w.shape[0], ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            out[:, :, i, j] = np.einsum("ncab,ocab->no", patch, w) + b
    return out


y_loop = conv_loop(x.astype(np.float64), w, b, 2, 1)
print("output shape:", y.shape)
print(f"unfold @ W vs conv2d: max diff {np.abs(y_gemm - y).max():.2e}; "
      f"conv2d vs the loop: max diff {np.abs(y - y_loop).max():.2e}")

# 3. Gradients for input, weight and bias, checked against central differences (float64).
ok = lz.utils.gradient_check(lambda a, k, c: F.conv2d(a, k, c, padding=1, stride=2),
                             x[:1, :2, :5, :5].astype(np.float64),
                             w[:2, :2].astype(np.float64), b[:2].astype(np.float64))
print("conv2d gradients (x, w, b) match central differences:", ok)
ok2 = lz.utils.check_double_backward(lambda a, k: F.conv2d(a, k, padding=1),
                                     x[:1, :2, :4, :4].astype(np.float64),
                                     w[:2, :2].astype(np.float64))
print("and so do second derivatives (double backward):", ok2)

# 4. The gradient with respect to x is a transposed convolution (col2im of W^T @ gy).
xv = lz.Variable(x)
yv = F.conv2d(xv, w, padding=1, stride=2)
gy = rng.standard_normal(yv.shape).astype(np.float32)
yv.backward(grad=gy)
gx_t = F.conv_transpose2d(gy, w, padding=1, stride=2, output_padding=(1, 0)).data
gx_f = F.fold(w.reshape(4, -1).T @ gy.reshape(2, 4, -1), (6, 7), 3, padding=1, stride=2).data
print("x.grad == conv_transpose2d(gy, w):", np.allclose(xv.grad.data, gx_t, atol=1e-5))
print("x.grad == fold(W^T @ gy)        :", np.allclose(xv.grad.data, gx_f, atol=1e-5))
