"""Step 4: backpropagation by hand.

Each Function remembers its input and implements ``backward``: given dL/dy it returns
dL/dx = dL/dy * f'(x).  Calling the backwards in reverse order applies the chain rule
from the output to the input, one multiplication per function.
Run: python steps/step04.py
"""
import numpy as np


class Variable:
    def __init__(self, data):
        self.data = data
        self.grad = None


class Function:
    def __call__(self, x):
        self.input = x
        return Variable(self.forward(x.data))


class Square(Function):
    def forward(self, x):
        return x ** 2

    def backward(self, gy):
        return 2 * self.input.data * gy


class Exp(Function):
    def forward(self, x):
        return np.exp(x)

    def backward(self, gy):
        return np.exp(self.input.data) * gy


A, B, C = Square(), Exp(), Square()
x = Variable(np.array(0.5))
a = A(x)
b = B(a)
y = C(b)

y.grad = np.array(1.0)
b.grad = C.backward(y.grad)
a.grad = B.backward(b.grad)
x.grad = A.backward(a.grad)
print("backprop by hand :", x.grad)
print("chain rule       :", 4 * 0.5 * np.exp(2 * 0.5 ** 2))
