"""Step 8: operator overloading. Variables behave like arrays.

``+ - * / ** @``, unary minus, reflected forms (``2 * x``) and indexing all create graph
nodes.  Python scalars adopt the array's dtype: a float32 Variable stays float32.
Run: python steps/step08.py
"""
import numpy as np

import lezero as lz

a = lz.Variable(np.array(3.0, dtype=np.float32))
b = lz.Variable(np.array(2.0, dtype=np.float32))
y = a * b + 1.0 - a / b + a ** 2 - (-b)
y.backward()
print("y =", y.item(), "dtype", y.dtype)
print("dy/da =", a.grad.item(), "(expected b + 1 - 1/b + 2a =", 2 + 1 - 0.5 + 6, ")")
print("dy/db =", b.grad.item(), "(expected a + a/b^2 + 1 =", 3 + 0.75 + 1, ")")

x = lz.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
z = (np.ones(3, np.float32) * x)[1, ::2] @ np.array([1.0, 10.0], np.float32)
z.backward()
print("indexing + reflected ops + matmul:", z.item(), "grad\n", x.grad.data)
