"""Step 12: gradient descent on the Rosenbrock function.

The banana-shaped valley of Rosenbrock's function (minimum at (1, 1)) makes plain gradient
descent crawl: many thousands of small steps.  Newton's method (step 14) fixes that.
Run: python steps/step12.py
"""
import numpy as np

import lezero as lz


def rosenbrock(x0, x1):
    return 100 * (x1 - x0 ** 2) ** 2 + (x0 - 1) ** 2


x0, x1 = lz.Variable(np.array(0.0)), lz.Variable(np.array(2.0))
lr = 1e-3
for i in range(4000):
    y = rosenbrock(x0, x1)
    x0.cleargrad()
    x1.cleargrad()
    y.backward()
    x0.data -= lr * x0.grad.data
    x1.data -= lr * x1.grad.data
    if i % 1000 == 0:
        print(f"iter {i:5d}: x = ({x0.item():.4f}, {x1.item():.4f}) f = {y.item():.6f}")
print(f"after 4000 steps: ({x0.item():.4f}, {x1.item():.4f}) (minimum at (1, 1))")
