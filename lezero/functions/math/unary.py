"""Elementwise functions of one argument, built from a table.

Each row names the function, its kernel on raw arrays (``xp`` is numpy or cupy) and its
derivative written with LeZero operators (so it can be differentiated again).  The
non-differentiable ones (sign, floor, ceil, round) return constants.
"""
import math

from lezero.core import Function
from lezero.functions.common import constant, xp_of
from lezero.functions.math.arith import inputs, rsqrt
from lezero.functions.registry import register

__all__ = ["exp", "expm1", "log", "log1p", "log2", "log10", "abs", "sign", "sin", "cos", "tan",
           "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
           "arctanh", "erf", "erfc", "floor", "ceil", "round"]

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)    # a Python float: keeps float32 in float32


class Elementwise(Function):
    """y = kernel(xp, x) elementwise; the gradient is derivative(gy, x, y).

    Subclasses are made by ``_elementwise`` from one table row each.
    """

    kernel = None
    derivative = None

    def forward(self, x):
        return self.kernel(xp_of(x), x)

    def backward(self, gy):
        return self.derivative(gy, self.inputs[0], self.outputs[0]())


FUNCTIONS = {}     # name -> its Function class (for introspection, e.g. exporters)


def _elementwise(name, kernel, derivative, doc, kinds="f"):
    """Define and register the operator ``name`` (a wrapper around a new Function class)."""
    cls = type(name.capitalize(), (Elementwise,),
               {"kernel": staticmethod(kernel), "derivative": staticmethod(derivative),
                "__doc__": doc})
    FUNCTIONS[name] = cls

    def op(x):
        return cls()(*inputs(name, ("x",), (x,), kinds))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return register("math", name=name)(op)


def _piecewise(name, kernel, doc, kinds="iuf"):
    """Define and register a non-differentiable operator: its output is a constant."""
    cls = type(name.capitalize(), (Function,),
               {"forward": lambda self, x: kernel(xp_of(x), x), "__doc__": doc})
    FUNCTIONS[name] = cls

    def op(x):
        (x,) = inputs(name, ("x",), (x,), kinds)
        return cls()(constant(x.data))     # a constant input: nothing is recorded

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return register("math", name=name, differentiable=False)(op)


def _special(xp):
    """scipy.special for NumPy arrays, cupyx.scipy.special for CuPy arrays."""
    if xp.__name__ == "numpy":
        import scipy.special
        return scipy.special
    import cupyx.scipy.special
    return cupyx.scipy.special


def _keep_integers(f):
    """Rounding kernels return integer input unchanged (NumPy would make it float64)."""
    return lambda xp, x: x.copy() if x.dtype.kind in "biu" else f(xp, x)


# ----- exponentials and logarithms -----------------------------------------------------------
exp = _elementwise("exp", lambda xp, x: xp.exp(x), lambda gy, x, y: gy * y, "e ** x.")
expm1 = _elementwise("expm1", lambda xp, x: xp.expm1(x), lambda gy, x, y: gy * (y + 1),
                     "exp(x) - 1, accurate for small x.")
log = _elementwise("log", lambda xp, x: xp.log(x), lambda gy, x, y: gy / x,
                   "Natural logarithm (nan below 0, -inf at 0).")
log1p = _elementwise("log1p", lambda xp, x: xp.log1p(x), lambda gy, x, y: gy / (x + 1),
                     "log(1 + x), accurate for small x.")
log2 = _elementwise("log2", lambda xp, x: xp.log2(x),
                    lambda gy, x, y: gy / (x * math.log(2)), "Base-2 logarithm.")
log10 = _elementwise("log10", lambda xp, x: xp.log10(x),
                     lambda gy, x, y: gy / (x * math.log(10)), "Base-10 logarithm.")

# ----- sign and magnitude ---------------------------------------------------------------------
sign = _piecewise("sign", lambda xp, x: xp.sign(x),
                  "-1, 0 or 1 by the sign of x (not differentiable: a constant).")
# The gradient of |x| at 0 is sign(0) = 0, as in PyTorch.
abs = _elementwise("abs", lambda xp, x: xp.abs(x), lambda gy, x, y: gy * sign(x),
                   "Absolute value; its gradient at 0 is 0, as in PyTorch.", kinds="iuf")

# ----- trigonometric ----------------------------------------------------------------------------
sin = _elementwise("sin", lambda xp, x: xp.sin(x), lambda gy, x, y: gy * cos(x), "Sine.")
cos = _elementwise("cos", lambda xp, x: xp.cos(x), lambda gy, x, y: gy * -sin(x), "Cosine.")
tan = _elementwise("tan", lambda xp, x: xp.tan(x), lambda gy, x, y: gy * (1 + y * y),
                   "Tangent.")
arcsin = _elementwise("arcsin", lambda xp, x: xp.arcsin(x),
                      lambda gy, x, y: gy * rsqrt(1 - x * x), "Inverse sine (torch.asin).")
arccos = _elementwise("arccos", lambda xp, x: xp.arccos(x),
                      lambda gy, x, y: -gy * rsqrt(1 - x * x), "Inverse cosine (torch.acos).")
arctan = _elementwise("arctan", lambda xp, x: xp.arctan(x),
                      lambda gy, x, y: gy / (1 + x * x), "Inverse tangent (torch.atan).")

# ----- hyperbolic -------------------------------------------------------------------------------
sinh = _elementwise("sinh", lambda xp, x: xp.sinh(x), lambda gy, x, y: gy * cosh(x),
                    "Hyperbolic sine.")
cosh = _elementwise("cosh", lambda xp, x: xp.cosh(x), lambda gy, x, y: gy * sinh(x),
                    "Hyperbolic cosine.")
tanh = _elementwise("tanh", lambda xp, x: xp.tanh(x), lambda gy, x, y: gy * (1 - y * y),
                    "Hyperbolic tangent.")
arcsinh = _elementwise("arcsinh", lambda xp, x: xp.arcsinh(x),
                       lambda gy, x, y: gy * rsqrt(x * x + 1), "Inverse hyperbolic sine.")
arccosh = _elementwise("arccosh", lambda xp, x: xp.arccosh(x),
                       lambda gy, x, y: gy * rsqrt(x * x - 1),
                       "Inverse hyperbolic cosine (defined for x >= 1).")
arctanh = _elementwise("arctanh", lambda xp, x: xp.arctanh(x),
                       lambda gy, x, y: gy / (1 - x * x),
                       "Inverse hyperbolic tangent (defined for -1 < x < 1).")

# ----- error function ---------------------------------------------------------------------------
erf = _elementwise("erf", lambda xp, x: _special(xp).erf(x),
                   lambda gy, x, y: gy * _TWO_OVER_SQRT_PI * exp(-(x * x)),
                   "The error function (scipy.special.erf / cupyx.scipy.special.erf).")
erfc = _elementwise("erfc", lambda xp, x: _special(xp).erfc(x),
                    lambda gy, x, y: gy * -_TWO_OVER_SQRT_PI * exp(-(x * x)),
                    "1 - erf(x), accurate where erf(x) is near 1.")

# ----- rounding (not differentiable) ------------------------------------------------------------
floor = _piecewise("floor", _keep_integers(lambda xp, x: xp.floor(x)),
                   "Largest integer <= x (a constant; integer input is returned as is).")
ceil = _piecewise("ceil", _keep_integers(lambda xp, x: xp.ceil(x)),
                  "Smallest integer >= x (a constant; integer input is returned as is).")


class Round(Function):
    """Round half to even to ``decimals`` places (NumPy's and PyTorch's rule)."""

    def __init__(self, decimals):
        self.decimals = decimals

    def forward(self, x):
        if x.dtype.kind in "biu" and self.decimals >= 0:
            return x.copy()
        return xp_of(x).round(x, self.decimals)


FUNCTIONS["round"] = Round


@register("math", differentiable=False)
def round(x, decimals=0):
    """Round to ``decimals`` places, halves to even, as ``numpy.round`` (a constant)."""
    if isinstance(decimals, bool) or not isinstance(decimals, int):
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    (x,) = inputs("round", ("x",), (x,), "iuf")
    return Round(decimals)(constant(x.data))
