"""Step 24: a first neural network, fit to a sine curve with plain gradient descent.

A straight line cannot follow sin(2 pi x).  Put a nonlinearity between two linear maps,

    h = sigmoid(x @ W1 + b1)        (100, 1) -> (100, 10)
    y = h @ W2 + b2                 (100, 10) -> (100, 1)

and the network can bend: each hidden unit is a smooth step, and the output layer adds
ten of them up.  Every piece is a LeZero operator (matmul, +, sigmoid, sum), so backward
gives the gradient of the loss for all four parameters, and training is the same loop as
linear regression in step 23: forward, backward, step against the gradient.
Run: python steps/step24.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

rng = np.random.default_rng(0)
lz.manual_seed(0)

# 1. Data: 100 noisy samples of one period of a sine (float32, as parameters are).
n = 100
xs = rng.random((n, 1)).astype(np.float32)
ys = (np.sin(2 * np.pi * xs) + 0.1 * rng.standard_normal((n, 1))).astype(np.float32)

# 2. Parameters.  Random weights break the symmetry between hidden units (with equal
#    weights every unit would get the same gradient and stay a copy of the others).
#    Hidden unit j is a smooth step at x = -b1[j] / W1[0, j]; starting the steps at random
#    places inside [0, 1], with slopes of a few units, puts them where the data is.
hidden = 10
W1 = lz.Variable((6 * rng.standard_normal((1, hidden))).astype(np.float32), name="W1")
b1 = lz.Variable((-W1.data[0] * rng.random(hidden)).astype(np.float32), name="b1")
W2 = lz.Variable((0.1 * rng.standard_normal((hidden, 1))).astype(np.float32), name="W2")
b2 = lz.Variable(np.zeros(1, np.float32), name="b2")
params = [W1, b1, W2, b2]


def predict(x):
    h = F.sigmoid(F.matmul(x, W1) + b1)     # the hidden layer
    return F.matmul(h, W2) + b2             # a linear read-out


def mse(y, t):
    diff = y - t
    return F.sum(diff * diff) / len(diff)


# 3. Training: full-batch gradient descent.
lr = 0.5
for step in range(2001):
    loss = mse(predict(xs), ys)
    for p in params:
        p.cleargrad()
    loss.backward()
    for p in params:
        p.data -= lr * p.grad.data          # in place: the Variables stay the same objects
    if step % 500 == 0:
        print(f"step {step:5d}  loss {loss.item():.4f}")

# 4. The fit: compare with the noise-free curve on a grid (the noise alone has MSE 0.01).
grid = np.linspace(0, 1, 11, dtype=np.float32)[:, None]
with lz.no_grad():
    fit = predict(grid).data
err = float(np.mean((fit - np.sin(2 * np.pi * grid)) ** 2))
print("x      ", np.round(grid[:, 0], 2))
print("fit    ", np.round(fit[:, 0], 2))
print("sin 2pi", np.round(np.sin(2 * np.pi * grid[:, 0]), 2))
print(f"mean squared error against the true curve: {err:.4f}")
print("parameters stay float32:", all(p.dtype == np.float32 for p in params))
