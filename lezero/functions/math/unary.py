"""Elementwise functions of one argument: exponentials and logarithms, trigonometric and
hyperbolic functions and their inverses, erf and erfc.

Each is an ``Elementwise`` subclass (its value on raw arrays, its gradient written with
LeZero operators so it can be differentiated again) registered by ``unary_operator``.
The class names (``Exp``, ``Log1p`` ...) are what per-operator tables key on.
"""
import math

from lezero.functions.math.arith import rsqrt
from lezero.functions.math.elementwise import Elementwise, unary_operator

__all__ = ["exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "arcsin",
           "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "erf",
           "erfc"]

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)    # a Python float: keeps float32 in float32


def _special(x):
    """The ``scipy.special`` of ``x``'s backend (SciPy's, cupyx's, the strict device's)."""
    from lezero.backends import get_backend
    return get_backend(x).special


# ----- exponentials and logarithms -----------------------------------------------------------

class Exp(Elementwise):
    """e ** x."""
    def f(self, xp, x):
        return xp.exp(x)

    def derivative(self, gy, x, y):
        return gy * y


class Expm1(Elementwise):
    """exp(x) - 1, accurate for small x."""
    def f(self, xp, x):
        return xp.expm1(x)

    def derivative(self, gy, x, y):
        return gy * (y + 1)


class Log(Elementwise):
    """Natural logarithm (nan below 0, -inf at 0)."""
    def f(self, xp, x):
        return xp.log(x)

    def derivative(self, gy, x, y):
        return gy / x


class Log1p(Elementwise):
    """log(1 + x), accurate for small x."""
    def f(self, xp, x):
        return xp.log1p(x)

    def derivative(self, gy, x, y):
        return gy / (x + 1)


class Log2(Elementwise):
    """Base-2 logarithm."""
    def f(self, xp, x):
        return xp.log2(x)

    def derivative(self, gy, x, y):
        return gy / (x * math.log(2))


class Log10(Elementwise):
    """Base-10 logarithm."""
    def f(self, xp, x):
        return xp.log10(x)

    def derivative(self, gy, x, y):
        return gy / (x * math.log(10))


# ----- trigonometric ----------------------------------------------------------------------------

class Sin(Elementwise):
    """Sine."""
    def f(self, xp, x):
        return xp.sin(x)

    def derivative(self, gy, x, y):
        return gy * cos(x)


class Cos(Elementwise):
    """Cosine."""
    def f(self, xp, x):
        return xp.cos(x)

    def derivative(self, gy, x, y):
        return gy * -sin(x)


class Tan(Elementwise):
    """Tangent."""
    def f(self, xp, x):
        return xp.tan(x)

    def derivative(self, gy, x, y):
        return gy * (1 + y * y)


class Arcsin(Elementwise):
    """Inverse sine (torch.asin)."""
    def f(self, xp, x):
        return xp.arcsin(x)

    def derivative(self, gy, x, y):
        return gy * rsqrt(1 - x * x)


class Arccos(Elementwise):
    """Inverse cosine (torch.acos)."""
    def f(self, xp, x):
        return xp.arccos(x)

    def derivative(self, gy, x, y):
        return -gy * rsqrt(1 - x * x)


class Arctan(Elementwise):
    """Inverse tangent (torch.atan)."""
    def f(self, xp, x):
        return xp.arctan(x)

    def derivative(self, gy, x, y):
        return gy / (1 + x * x)


# ----- hyperbolic -------------------------------------------------------------------------------

class Sinh(Elementwise):
    """Hyperbolic sine."""
    def f(self, xp, x):
        return xp.sinh(x)

    def derivative(self, gy, x, y):
        return gy * cosh(x)


class Cosh(Elementwise):
    """Hyperbolic cosine."""
    def f(self, xp, x):
        return xp.cosh(x)

    def derivative(self, gy, x, y):
        return gy * sinh(x)


class Tanh(Elementwise):
    """Hyperbolic tangent."""
    def f(self, xp, x):
        return xp.tanh(x)

    def derivative(self, gy, x, y):
        return gy * (1 - y * y)


class Arcsinh(Elementwise):
    """Inverse hyperbolic sine."""
    def f(self, xp, x):
        return xp.arcsinh(x)

    def derivative(self, gy, x, y):
        return gy * rsqrt(x * x + 1)


class Arccosh(Elementwise):
    """Inverse hyperbolic cosine (defined for x >= 1)."""
    def f(self, xp, x):
        return xp.arccosh(x)

    def derivative(self, gy, x, y):
        return gy * rsqrt(x * x - 1)


class Arctanh(Elementwise):
    """Inverse hyperbolic tangent (defined for -1 < x < 1)."""
    def f(self, xp, x):
        return xp.arctanh(x)

    def derivative(self, gy, x, y):
        return gy / (1 - x * x)


# ----- error function ---------------------------------------------------------------------------

class Erf(Elementwise):
    """The error function (scipy.special.erf / cupyx.scipy.special.erf)."""
    def f(self, xp, x):
        return _special(x).erf(x)

    def derivative(self, gy, x, y):
        return gy * _TWO_OVER_SQRT_PI * exp(-(x * x))


class Erfc(Elementwise):
    """1 - erf(x), accurate where erf(x) is near 1."""
    def f(self, xp, x):
        return _special(x).erfc(x)

    def derivative(self, gy, x, y):
        return gy * -_TWO_OVER_SQRT_PI * exp(-(x * x))


exp, expm1, log, log1p, log2, log10 = (unary_operator(n, c) for n, c in (
    ("exp", Exp), ("expm1", Expm1), ("log", Log), ("log1p", Log1p), ("log2", Log2),
    ("log10", Log10)))
sin, cos, tan, arcsin, arccos, arctan = (unary_operator(n, c) for n, c in (
    ("sin", Sin), ("cos", Cos), ("tan", Tan), ("arcsin", Arcsin), ("arccos", Arccos),
    ("arctan", Arctan)))
sinh, cosh, tanh, arcsinh, arccosh, arctanh = (unary_operator(n, c) for n, c in (
    ("sinh", Sinh), ("cosh", Cosh), ("tanh", Tanh), ("arcsinh", Arcsinh),
    ("arccosh", Arccosh), ("arctanh", Arctanh)))
erf, erfc = unary_operator("erf", Erf), unary_operator("erfc", Erfc)
