"""Step 5: automate backprop with a loop over creators.

Each output remembers the Function that created it (its *creator*), each Function
remembers its input.  ``Variable.backward`` walks that linked list from the output back to
the leaves with a plain loop (a recursion would overflow the stack on deep graphs).
Run: python steps/step05.py
"""
import numpy as np


class Variable:
    def __init__(self, data):
        self.data = data
        self.grad = None
        self.creator = None

    def backward(self):
        if self.grad is None:
            self.grad = np.ones_like(self.data)
        funcs = [self.creator]
        while funcs:
            f = funcs.pop()
            x, y = f.input, f.output
            x.grad = f.backward(y.grad)
            if x.creator is not None:
                funcs.append(x.creator)


class Function:
    def __call__(self, x):
        y = Variable(self.forward(x.data))
        y.creator = self
        self.input, self.output = x, y
        return y


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


x = Variable(np.array(0.5))
y = Square()(Exp()(Square()(x)))
y.backward()
print("automatic backprop:", x.grad)



class AddOne(Function):
    def forward(self, x):
        return x + 1

    def backward(self, gy):
        return gy


# A deep chain: the loop handles 10,000 functions where recursion would not.
z = Variable(np.array(0.0))
h = z
for _ in range(10000):
    h = AddOne()(h)
h.backward()
print("10,000 functions deep: value", h.data, "gradient", z.grad)
