"""Step 1: a Variable is a box that holds data.

Everything in a define-by-run framework starts with a container for an array.  Later the
box also remembers where its data came from (its *creator*) and its gradient.
Run: python steps/step01.py
"""
import numpy as np


class Variable:
    def __init__(self, data):
        if not isinstance(data, np.ndarray):
            raise TypeError(f"Variable: expected an ndarray, got {type(data).__name__}")
        self.data = data


x = Variable(np.array(1.0))
print("x.data =", x.data)
x.data = np.array(2.0)
print("after assignment, x.data =", x.data)
m = Variable(np.array([[1, 2, 3], [4, 5, 6]]))
print("a matrix Variable: ndim =", m.data.ndim, "shape =", m.data.shape)
try:
    Variable(1.0)
except TypeError as e:
    print("rejected:", e)
