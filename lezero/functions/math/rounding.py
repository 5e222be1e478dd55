"""Sign, magnitude and rounding: abs sign floor ceil round.

``abs`` is differentiable (its gradient at 0 is sign(0) = 0, as in PyTorch); ``sign``,
``floor``, ``ceil`` and ``round`` are not: their outputs are constants.  Integer input is
returned as it is by the rounding functions (NumPy would make it float64).
"""
from lezero.functions.common import as_variable, operands
from lezero.functions.math.elementwise import FUNCTIONS, Elementwise, unary_operator
from lezero.functions.registry import register
from lezero.utils.checks import check_int

__all__ = ["abs", "sign", "floor", "ceil", "round"]


class Sign(Elementwise):
    """-1, 0 or 1 by the sign of x (not differentiable: a constant)."""
    def f(self, xp, x):
        return xp.sign(x)


class Abs(Elementwise):
    """Absolute value; its gradient at 0 is 0, as in PyTorch."""
    def f(self, xp, x):
        return xp.abs(x)

    def derivative(self, gy, x, y):
        return gy * sign(x)


class Floor(Elementwise):
    """Largest integer <= x (a constant; integer input is returned as is)."""
    def f(self, xp, x):
        return x.copy() if x.dtype.kind in "biu" else xp.floor(x)


class Ceil(Elementwise):
    """Smallest integer >= x (a constant; integer input is returned as is)."""
    def f(self, xp, x):
        return x.copy() if x.dtype.kind in "biu" else xp.ceil(x)


class Round(Elementwise):
    """Round half to even to ``decimals`` places (NumPy's and PyTorch's rule)."""
    def f(self, xp, x):
        if x.dtype.kind in "biu" and self.decimals >= 0:
            return x.copy()
        return xp.round(x, self.decimals)


sign = unary_operator("sign", Sign, kinds="iuf", differentiable=False)
abs = unary_operator("abs", Abs, kinds="iuf")
floor = unary_operator("floor", Floor, kinds="iuf", differentiable=False)
ceil = unary_operator("ceil", Ceil, kinds="iuf", differentiable=False)
FUNCTIONS["round"] = Round


@register("math", differentiable=False)
def round(x, decimals=0):
    """Round to ``decimals`` places, halves to even, as ``numpy.round`` (a constant)."""
    decimals = check_int("round", "decimals", decimals)
    (x,) = operands("round", ("x",), (x,), "iuf")
    return Round(decimals=decimals)(as_variable(x.data))
