"""Step 14: Newton's method with automatic second derivatives.

Newton's update x <- x - f'(x) / f''(x) uses curvature and converges in a handful of
iterations where gradient descent needs thousands.
Run: python steps/step14.py
"""
import numpy as np

import lezero as lz


def f(x):
    return x ** 4 - 2 * x ** 2


x = lz.Variable(np.array(2.0))
for i in range(8):
    (g,) = lz.grad(f(x), x, create_graph=True)
    (h,) = lz.grad(g, x)
    print(f"iter {i}: x = {x.item():.10f}")
    x.data = x.data - g.data / h.data
print("converged to the minimum at x = 1:", np.isclose(x.item(), 1.0))


# Newton on a 2-D function with a Hessian built from gradients of gradients.
def rosenbrock(v):
    return 100 * (v[1] - v[0] ** 2) ** 2 + (v[0] - 1) ** 2


v = lz.Variable(np.array([0.0, 2.0]))
for i in range(10):
    (g,) = lz.grad(rosenbrock(v), v, create_graph=True)
    # Both rows differentiate the same graph of g: keep it for the second (as in PyTorch,
    # a backward frees what the graph kept unless retain_graph=True).
    hessian = np.stack([lz.grad(g[k], v, retain_graph=True)[0].data for k in range(2)])
    v.data = v.data - np.linalg.solve(hessian, g.data)
print("Newton on Rosenbrock after 10 iterations:", np.round(v.data, 8))
