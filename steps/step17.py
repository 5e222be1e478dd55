"""Step 17: your own operator. Subclass ``lz.Function``.

``forward`` works on raw arrays; ``backward`` on Variables, written with LeZero operators,
so the new operator supports double backward at once.  ``gradient_check`` compares it with
central differences (see docs/custom_ops.md).
Run: python steps/step17.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F


class Softplus(lz.Function):
    """log(1 + e^x), computed stably as max(x, 0) + log1p(e^-|x|)."""

    def forward(self, x):
        xp = lz.cuda.get_array_module(x)
        return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))

    def backward(self, gy):
        x, = self.inputs
        return gy / (1 + F.exp(-x))      # the logistic sigmoid, itself differentiable


def softplus(x):
    return Softplus()(x)


x = np.linspace(-3, 3, 7)
print("forward     :", np.round(softplus(lz.Variable(x)).data, 4))
print("large input :", softplus(lz.Variable(np.array([1000.0, -1000.0]))).data, "(no overflow)")
print("gradient_check       :", lz.utils.gradient_check(softplus, x))
print("check_double_backward:", lz.utils.check_double_backward(softplus, x))
