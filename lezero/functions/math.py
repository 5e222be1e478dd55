"""Elementwise arithmetic and math operators (NumPy names, NumPy broadcasting).

Every backward is written with LeZero operators, so gradients can be differentiated again.
Binary operators reduce their gradients back to each input's shape with ``sum_to``.
"""
from lezero.core import Function
from lezero.functions._utils import xp_of
from lezero.functions.registry import register
from lezero.functions.shape import sum_to

__all__ = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sin", "cos", "tanh",
           "rsub", "rdiv", "rpow"]


def _grads(f, gx0, gx1):
    """Reduce each gradient to its input's shape (undoing broadcasting); None when the
    input is a constant."""
    x0, x1 = f.inputs
    n0, n1 = f.needs_input_grad
    return (sum_to(gx0, x0.shape) if n0 else None,
            sum_to(gx1, x1.shape) if n1 else None)


class Add(Function):
    def forward(self, x0, x1):
        return x0 + x1

    def backward(self, gy):
        return _grads(self, gy, gy)


@register("math")
def add(x0, x1):
    """x0 + x1."""
    return Add()(x0, x1)


class Sub(Function):
    def forward(self, x0, x1):
        return x0 - x1

    def backward(self, gy):
        return _grads(self, gy, -gy if self.needs_input_grad[1] else None)


@register("math")
def sub(x0, x1):
    """x0 - x1."""
    return Sub()(x0, x1)


def rsub(x0, x1):
    """x1 - x0 (for ``2 - x``)."""
    return Sub()(x1, x0)


class Mul(Function):
    def forward(self, x0, x1):
        return x0 * x1

    def backward(self, gy):
        x0, x1 = self.inputs
        n0, n1 = self.needs_input_grad
        return _grads(self, gy * x1 if n0 else None, gy * x0 if n1 else None)


@register("math")
def mul(x0, x1):
    """x0 * x1."""
    return Mul()(x0, x1)


class Div(Function):
    def forward(self, x0, x1):
        return x0 / x1

    def backward(self, gy):
        x0, x1 = self.inputs
        gx0 = gy / x1
        gx1 = -gx0 * x0 / x1 if self.needs_input_grad[1] else None
        return _grads(self, gx0, gx1)


@register("math")
def div(x0, x1):
    """x0 / x1 (true division)."""
    return Div()(x0, x1)


def rdiv(x0, x1):
    """x1 / x0 (for ``2 / x``)."""
    return Div()(x1, x0)


class Neg(Function):
    def forward(self, x):
        return -x

    def backward(self, gy):
        return -gy


@register("math")
def neg(x):
    """-x."""
    return Neg()(x)


class Pow(Function):
    def forward(self, x, c):
        return x ** c

    def backward(self, gy):
        x, c = self.inputs
        n0, n1 = self.needs_input_grad
        return _grads(self, gy * c * x ** (c - 1) if n0 else None,
                      gy * self.outputs[0]() * log(x) if n1 else None)


@register("math")
def pow(x, c):
    """x ** c; ``c`` may be a number, an array or a Variable (then it gets a gradient)."""
    return Pow()(x, c)


def rpow(x, c):
    """c ** x (for ``2 ** x``)."""
    return Pow()(c, x)


class Exp(Function):
    def forward(self, x):
        return xp_of(x).exp(x)

    def backward(self, gy):
        return gy * self.outputs[0]()


@register("math")
def exp(x):
    """e ** x."""
    return Exp()(x)


class Log(Function):
    def forward(self, x):
        return xp_of(x).log(x)

    def backward(self, gy):
        return gy / self.inputs[0]


@register("math")
def log(x):
    """Natural logarithm."""
    return Log()(x)


class Sin(Function):
    def forward(self, x):
        return xp_of(x).sin(x)

    def backward(self, gy):
        return gy * cos(self.inputs[0])


@register("math")
def sin(x):
    """Sine."""
    return Sin()(x)


class Cos(Function):
    def forward(self, x):
        return xp_of(x).cos(x)

    def backward(self, gy):
        return gy * -sin(self.inputs[0])


@register("math")
def cos(x):
    """Cosine."""
    return Cos()(x)


class Tanh(Function):
    def forward(self, x):
        return xp_of(x).tanh(x)

    def backward(self, gy):
        y = self.outputs[0]()
        return gy * (1 - y * y)


@register("math")
def tanh(x):
    """Hyperbolic tangent."""
    return Tanh()(x)
