"""Step 23: the matrix product, and linear regression by gradient descent.

For y = x @ W the chain rule gives two more matrix products:
    dL/dx = dL/dy @ W.T        dL/dW = x.T @ dL/dy
(shapes force this: each gradient has its variable's shape).  With that, fitting a line
to noisy points is a loop of forward, backward and a small step against the gradient.
Run: python steps/step23.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

# 1. The matmul gradients are matrix products, checked against the formulas above.
rng = np.random.default_rng(0)
x = lz.Variable(rng.standard_normal((4, 3)))
W = lz.Variable(rng.standard_normal((3, 2)))
y = F.matmul(x, W)
gy = rng.standard_normal((4, 2))
y.backward(grad=gy)
print("dL/dx == gy @ W.T:", np.allclose(x.grad.data, gy @ W.data.T))
print("dL/dW == x.T @ gy:", np.allclose(W.grad.data, x.data.T @ gy))

# 2. Linear regression: 100 points near y = 2x + 5.
n = 100
xs = rng.random((n, 1))
ys = 5 + 2 * xs + rng.random((n, 1))        # uniform noise with mean 0.5: intercept ~5.5

W = lz.Variable(np.zeros((1, 1)))
b = lz.Variable(np.zeros(1))


def predict(x):
    return F.matmul(x, W) + b


lr = 0.1
for i in range(1000):
    diff = predict(xs) - ys
    loss = F.sum(diff * diff) / n            # mean squared error
    W.cleargrad()
    b.cleargrad()
    loss.backward()
    W.data -= lr * W.grad.data
    b.data -= lr * b.grad.data
    if i % 250 == 0:
        print(f"iter {i:4d}  loss {loss.item():.5f}")

# The closed-form least-squares fit is the answer gradient descent should reach.
A = np.hstack([xs, np.ones((n, 1))])
w_ls, b_ls = np.linalg.lstsq(A, ys, rcond=None)[0].ravel()
print(f"gradient descent: W = {W.data.item():.4f}, b = {b.data.item():.4f}")
print(f"least squares:    W = {w_ls:.4f}, b = {b_ls:.4f}")
print("converged to least squares:", abs(W.data.item() - w_ls) < 1e-3
      and abs(b.data.item() - b_ls) < 1e-3)

# 3. F.linear does the same in PyTorch's layout (weight is (out, in)) as one fused op.
y_lin = F.linear(lz.Variable(xs), W.data.T, b.data)
print("F.linear agrees with x @ W + b:", np.allclose(y_lin.data, predict(xs).data))
