"""Step 13: higher-order derivatives.

With ``create_graph=True`` the backward pass is recorded too, so a gradient is an ordinary
Variable with a creator, and it can be differentiated again, to any order.
Run: python steps/step13.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

x = lz.Variable(np.array(1.0))
y = F.tanh(x)
derivs = []
for n in range(1, 5):
    (y,) = lz.grad(y, x, create_graph=True)
    derivs.append(y.item())
t = np.tanh(1.0)
s = 1 - t ** 2                       # closed forms of tanh's derivatives at 1
closed = [s, -2 * t * s, -2 * s * s + 4 * t * t * s, 16 * t * s * s - 8 * t ** 3 * s]
for n, (a, b) in enumerate(zip(derivs, closed), 1):
    print(f"d^{n} tanh / dx^{n} at 1: autodiff {a:+.10f}   closed form {b:+.10f}")

# The same with y.backward(create_graph=True): x.grad keeps its graph.
x = lz.Variable(np.array(2.0))
y = x ** 4 - 2 * x ** 2
y.backward(create_graph=True)
gx = x.grad
x.cleargrad()
gx.backward()
print("f = x^4 - 2x^2 at 2: f' =", gx.item(), " f'' =", x.grad.item(), "(expected 24, 44)")
