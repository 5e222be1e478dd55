"""Step 9: optimisation test functions, differentiated automatically.

The sphere, Matyas and Goldstein-Price functions are classic benchmarks for optimisers.
Their gradients, by automatic differentiation, match the closed forms.
Run: python steps/step09.py
"""
import numpy as np

import lezero as lz


def sphere(x, y):
    return x ** 2 + y ** 2


def matyas(x, y):
    return 0.26 * (x ** 2 + y ** 2) - 0.48 * x * y


def goldstein(x, y):
    return (1 + (x + y + 1) ** 2 * (19 - 14 * x + 3 * x ** 2 - 14 * y + 6 * x * y + 3 * y ** 2)) * \
        (30 + (2 * x - 3 * y) ** 2 * (18 - 32 * x + 12 * x ** 2 + 48 * y - 36 * x * y + 27 * y ** 2))


for f, expected in [(sphere, (2.0, 2.0)), (matyas, (0.04, 0.04)), (goldstein, (-5376.0, 8064.0))]:
    x, y = lz.Variable(np.array(1.0)), lz.Variable(np.array(1.0))
    f(x, y).backward()
    print(f"{f.__name__:<10} grad at (1, 1): ({x.grad.item():.4f}, {y.grad.item():.4f})"
          f"  expected {expected}")
