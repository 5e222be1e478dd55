"""Arithmetic: add sub mul div neg pow square sqrt rsqrt reciprocal (and the reflected forms).

This module also holds the helpers the family's binary operators share: ``binary``
validates two operands (``operands`` turns them into Variables, ``broadcast_shape`` checks
that they broadcast, both before any kernel runs) and ``unbroadcast`` sums each gradient
back to its input's shape.
"""
import numpy as np

from lezero.core import Function, Variable
from lezero.functions.common import operands, xp_of
from lezero.functions.registry import register
from lezero.functions.shape import sum_to
from lezero.kernels import add as add_kernel
from lezero.runtime import policy

__all__ = ["add", "sub", "mul", "div", "neg", "pow", "square", "sqrt", "rsqrt", "reciprocal",
           "rsub", "rdiv", "rpow"]

def broadcast_shape(op, names, xs):
    """The broadcast shape of the Variables ``xs``; ValueError naming ``op`` if none."""
    shapes = [x.shape for x in xs]
    if all(s == shapes[0] for s in shapes):
        return shapes[0]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        got = ", ".join(f"{n} {s}" for n, s in zip(names, shapes))
        raise ValueError(f"{op}: operands cannot be broadcast together: {got}") from None


def binary(op, x0, x1, kinds="biuf", names=("x0", "x1")):
    """Validate the two operands of a broadcasting binary operator; return Variables."""
    if isinstance(x0, Variable) and isinstance(x1, Variable):
        # The hot path (two Variables, same shape) checks only what can go wrong there;
        # bfloat16 (kind 'V') takes the full check below.
        d0, d1 = x0.data, x1.data
        if d0.shape == d1.shape and d0.dtype.kind in kinds and d1.dtype.kind in kinds:
            return x0, x1
    a, b = operands(op, names, (x0, x1), kinds)
    if a.data.shape != b.data.shape:
        broadcast_shape(op, names, (a, b))
    return a, b


def arith(fn, op, x0, x1, kinds="biuf"):
    """``fn()`` called on two operands, checked as ``binary`` checks them.

    Two Variables of accepted dtypes go straight to the operator and NumPy checks that
    their shapes broadcast as it computes, so a call pays for no check twice; should it
    refuse them, ``binary`` raises the error that names the operator.
    Anything else takes ``binary``'s checks first."""
    if isinstance(x0, Variable) and isinstance(x1, Variable) \
            and x0.data.dtype.kind in kinds and x1.data.dtype.kind in kinds:
        try:
            return fn().call2(x0, x1)
        except ValueError:
            pass                            # shapes that do not broadcast: named below
    x0, x1 = binary(op, x0, x1, kinds)
    return fn().call2(x0, x1)


def unbroadcast(f, gx0, gx1):
    """Reduce each gradient to its input's shape (undoing broadcasting); None when the
    input is a constant."""
    x0, x1 = f.inputs
    n0, n1 = f.needs_input_grad
    if n0 and gx0 is not None:
        s0 = x0.data.shape if type(x0) is Variable else x0.shape     # or an InputRef
        gx0 = gx0 if gx0.data.shape == s0 else sum_to(gx0, s0)   # skip the call when equal
    if n1 and gx1 is not None:
        s1 = x1.data.shape if type(x1) is Variable else x1.shape
        gx1 = gx1 if gx1.data.shape == s1 else sum_to(gx1, s1)
    return (gx0 if n0 else None), (gx1 if n1 else None)


class Add(Function):
    save_inputs, reads_outputs = (), False      # the gradient needs the shapes only

    def forward(self, x0, x1):
        # most adds are short: only a long array asks the split kernel (no call per add)
        if x0.size >= 2 * policy.cheap_min_part_items and type(x0) is np.ndarray:
            return add_kernel.add(x0, x1)
        return x0 + x1

    def backward(self, gy):
        return unbroadcast(self, gy, gy)


@register("math")
def add(x0, x1):
    """x0 + x1, with NumPy broadcasting."""
    return arith(Add, "add", x0, x1)


class Sub(Function):
    save_inputs, reads_outputs = (), False

    def forward(self, x0, x1):
        return x0 - x1

    def backward(self, gy):
        return unbroadcast(self, gy, -gy if self.needs_input_grad[1] else None)


@register("math")
def sub(x0, x1):
    """x0 - x1, with NumPy broadcasting."""
    return arith(Sub, "sub", x0, x1, kinds="iuf")


def rsub(x0, x1):
    """x1 - x0 (for ``2 - x``)."""
    return sub(x1, x0)


class Mul(Function):
    def forward(self, x0, x1):
        n0, n1 = self.needs_input_grad
        if n0 != n1:      # keep only the factor backward reads (x * mask keeps the mask)
            self.save_inputs = (1,) if n0 else (0,)
        return x0 * x1

    def backward(self, gy):
        x0, x1 = self.inputs
        n0, n1 = self.needs_input_grad
        return unbroadcast(self, gy * x1 if n0 else None, gy * x0 if n1 else None)


@register("math")
def mul(x0, x1):
    """x0 * x1, with NumPy broadcasting."""
    return arith(Mul, "mul", x0, x1)


class Div(Function):
    def forward(self, x0, x1):
        y = x0 / x1
        if x0.dtype.kind != "f" and x1.dtype.kind != "f":
            # Integer true division gives float64 in NumPy; like PyTorch, give float32.
            y = y.astype(np.float32)
        return y

    def backward(self, gy):
        x0, x1 = self.inputs
        gx0 = gy / x1
        gx1 = -gx0 * x0 / x1 if self.needs_input_grad[1] else None
        return unbroadcast(self, gx0, gx1)


@register("math")
def div(x0, x1):
    """x0 / x1 (true division; integers divide to float32, as in PyTorch)."""
    return arith(Div, "div", x0, x1)


def rdiv(x0, x1):
    """x1 / x0 (for ``2 / x``)."""
    return div(x1, x0)


class Neg(Function):
    def forward(self, x):
        return -x

    def backward(self, gy):
        return -gy


@register("math")
def neg(x):
    """-x."""
    return Neg()(*operands("neg", ("x",), (x,), kinds="iuf"))


class Pow(Function):
    def forward(self, x, c):
        return x ** c

    def backward(self, gy):
        # log lives with the elementwise functions, which import this module.
        from lezero.functions.math.unary import log
        x, c = self.inputs
        n0, n1 = self.needs_input_grad
        return unbroadcast(self, gy * c * x ** (c - 1) if n0 else None,
                      gy * self.outputs[0]() * log(x) if n1 else None)


@register("math")
def pow(x, c):
    """x ** c; ``c`` may be a number, an array or a Variable (then it gets a gradient)."""
    x, c = binary("pow", x, c, names=("x", "c"))
    if x.dtype.kind in "biu" and c.dtype.kind in "biu" and bool((c.data < 0).any()):
        raise ValueError("pow: an integer x cannot be raised to a negative integer power "
                         f"(got c with minimum {int(c.data.min())}); use a float x")
    return Pow()(x, c)


def rpow(x, c):
    """c ** x (for ``2 ** x``)."""
    return pow(c, x)


class Square(Function):
    def forward(self, x):
        return x * x

    def backward(self, gy):
        return gy * 2 * self.inputs[0]


@register("math")
def square(x):
    """x * x."""
    return Square()(*operands("square", ("x",), (x,), kinds="iuf"))


class Sqrt(Function):
    def forward(self, x):
        return xp_of(x).sqrt(x)

    def backward(self, gy):
        return gy * 0.5 / self.outputs[0]()


@register("math")
def sqrt(x):
    """Square root (nan below 0, as NumPy and PyTorch)."""
    return Sqrt()(*operands("sqrt", ("x",), (x,), kinds="f"))


class Rsqrt(Function):
    def forward(self, x):
        return 1 / xp_of(x).sqrt(x)

    def backward(self, gy):
        y = self.outputs[0]()
        return gy * -0.5 * y * y * y


@register("math")
def rsqrt(x):
    """1 / sqrt(x)."""
    return Rsqrt()(*operands("rsqrt", ("x",), (x,), kinds="f"))


class Reciprocal(Function):
    def forward(self, x):
        return 1 / x

    def backward(self, gy):
        y = self.outputs[0]()
        return -gy * y * y


@register("math")
def reciprocal(x):
    """1 / x."""
    return Reciprocal()(*operands("reciprocal", ("x",), (x,), kinds="f"))
