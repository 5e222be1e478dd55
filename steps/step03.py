"""Step 3: numerical differentiation, and why we want something better.

The central difference (f(x+h) - f(x-h)) / 2h approximates a derivative with an error of
order h^2, but costs two evaluations per input element and loses digits to cancellation.
Run: python steps/step03.py
"""
import numpy as np


def numerical_diff(f, x, eps=1e-4):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def f(x):
    return np.exp(x ** 2) ** 2          # the composite of step 2


x = 0.5
exact = 4 * x * np.exp(2 * x ** 2)      # chain rule by hand
print(f"central difference: {numerical_diff(f, x):.10f}")
print(f"chain rule        : {exact:.10f}")
for eps in (1e-1, 1e-4, 1e-8, 1e-12):
    err = abs(numerical_diff(f, x, eps) - exact)
    print(f"eps={eps:<6g} error={err:.2e}")
print("too large eps: truncation error; too small: rounding error.")
