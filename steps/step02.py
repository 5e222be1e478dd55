"""Step 2: a Function turns Variables into Variables.

``Function.__call__`` unwraps the data, runs ``forward`` on raw arrays and wraps the
result.  Subclasses only write ``forward``; composing them composes the math.
Run: python steps/step02.py
"""
import numpy as np


class Variable:
    def __init__(self, data):
        self.data = data


class Function:
    def __call__(self, x):
        y = self.forward(x.data)
        return Variable(y)

    def forward(self, x):
        raise NotImplementedError


class Square(Function):
    def forward(self, x):
        return x ** 2


class Exp(Function):
    def forward(self, x):
        return np.exp(x)


x = Variable(np.array(0.5))
y = Square()(Exp()(Square()(x)))      # (e^(x^2))^2
print("y = (exp(x^2))^2 at x=0.5:", y.data)
print("check with NumPy          :", np.exp(0.5 ** 2) ** 2)
