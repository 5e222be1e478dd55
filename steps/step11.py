"""Step 11: Taylor series: a loop in Python becomes a graph.

sin(x) = sum_i (-1)^i x^(2i+1) / (2i+1)!.  Define-by-run records whatever the Python loop
does, so the gradient of the truncated series is the truncated series of cos(x).
Run: python steps/step11.py
"""
import math

import numpy as np

import lezero as lz


def my_sin(x, threshold=1e-12):
    y = 0
    for i in range(100000):
        t = (-1) ** i / math.factorial(2 * i + 1) * x ** (2 * i + 1)
        y = y + t
        if abs(t.data) < threshold:
            break
    return y


x = lz.Variable(np.array(np.pi / 4))
y = my_sin(x)
y.backward()
print(f"my_sin(pi/4) = {y.item():.12f}   np.sin = {np.sin(np.pi / 4):.12f}")
print(f"gradient     = {x.grad.item():.12f}   np.cos = {np.cos(np.pi / 4):.12f}")
