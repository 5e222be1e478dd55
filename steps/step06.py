"""Step 6: many inputs, reused variables and generations.

Real graphs are DAGs: a Function may take several inputs, and a Variable may feed several
Functions.  Two fixes make backprop correct there:
  * gradients of a reused Variable are *added* (x + x has gradient 2), and
  * Functions run in reverse topological order.  Each Variable and Function gets a
    *generation* (one more than its creator), and backward pops the newest generation
    first from a heap, so a Variable's gradient is complete before its creator runs.
Run: python steps/step06.py
"""
import heapq

import numpy as np


class Variable:
    def __init__(self, data):
        self.data, self.grad, self.creator, self.generation = data, None, None, 0

    def backward(self):
        self.grad = np.ones_like(self.data)
        heap, seen, order = [], set(), 0

        def push(f):
            nonlocal order
            if f is not None and f not in seen:
                seen.add(f)
                heapq.heappush(heap, (-f.generation, order, f))
                order += 1

        push(self.creator)
        while heap:
            f = heapq.heappop(heap)[2]
            gxs = f.backward(f.output.grad)
            for x, gx in zip(f.inputs, gxs):
                x.grad = gx if x.grad is None else x.grad + gx     # accumulate
                push(x.creator)


class Function:
    def __call__(self, *inputs):
        y = Variable(self.forward(*[x.data for x in inputs]))
        self.generation = max(x.generation for x in inputs)
        y.creator, y.generation = self, self.generation + 1
        self.inputs, self.output = inputs, y
        return y


class Add(Function):
    def forward(self, a, b):
        return a + b

    def backward(self, gy):
        return gy, gy


class Square(Function):
    def forward(self, x):
        return x ** 2

    def backward(self, gy):
        return (2 * self.inputs[0].data * gy,)


x = Variable(np.array(3.0))
y = Add()(x, x)
y.backward()
print("d(x + x)/dx =", x.grad)

# x -> a = x^2 -> y = a^2 + a^2: the diamond needs generation order.
x = Variable(np.array(2.0))
a = Square()(x)
y = Add()(Square()(a), Square()(a))
y.backward()
print("y = 2 x^4, dy/dx at 2 =", x.grad, "(expected 64.0)")
