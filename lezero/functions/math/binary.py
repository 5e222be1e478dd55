"""Elementwise functions of two or three arguments: arctan2 hypot maximum minimum clip where.

All broadcast with NumPy's rules; gradients are summed back to each input's shape.
Selections (maximum, minimum, clip, where) route the gradient with constant masks, following
PyTorch's rules at ties and at the clip bounds.
"""
from lezero.core import Function, Variable
from lezero.functions.common import as_variable, operands, xp_of
from lezero.functions.math.arith import binary, broadcast_shape, unbroadcast
from lezero.functions.registry import register
from lezero.functions.shape import sum_to

__all__ = ["arctan2", "hypot", "maximum", "minimum", "clip", "where"]


class Arctan2(Function):
    def forward(self, x1, x2):
        return xp_of(x1, x2).arctan2(x1, x2)

    def backward(self, gy):
        x1, x2 = self.inputs
        g = gy / (x1 * x1 + x2 * x2)
        n1, n2 = self.needs_input_grad
        return unbroadcast(self, g * x2 if n1 else None, -g * x1 if n2 else None)


@register("math")
def arctan2(x1, x2):
    """The angle of the point (x2, x1): arctan(x1 / x2) in the right quadrant (torch.atan2)."""
    return Arctan2()(*binary("arctan2", x1, x2, kinds="f", names=("x1", "x2")))


class Hypot(Function):
    def forward(self, x1, x2):
        return xp_of(x1, x2).hypot(x1, x2)

    def backward(self, gy):
        x1, x2 = self.inputs
        g = gy / self.outputs[0]()
        n1, n2 = self.needs_input_grad
        return unbroadcast(self, g * x1 if n1 else None, g * x2 if n2 else None)


@register("math")
def hypot(x1, x2):
    """sqrt(x1 ** 2 + x2 ** 2) without overflow in the squares."""
    return Hypot()(*binary("hypot", x1, x2, kinds="f", names=("x1", "x2")))


class Extremum(Function):
    """Elementwise maximum (``largest``) or minimum; ties split the gradient half/half."""

    def __init__(self, largest):
        self.largest = largest

    def forward(self, x0, x1):
        xp = xp_of(x0, x1)
        return xp.maximum(x0, x1) if self.largest else xp.minimum(x0, x1)

    def backward(self, gy):
        x0, x1 = self.inputs
        a, b = x0.data, x1.data
        wins = a > b if self.largest else a < b
        # Weight 1 for the selected input, 0.5 each on a tie (as torch.maximum).
        w0 = wins.astype(gy.dtype) + (a == b).astype(gy.dtype) * 0.5
        n0, n1 = self.needs_input_grad
        return unbroadcast(self, gy * as_variable(w0) if n0 else None,
                      gy * as_variable(1 - w0) if n1 else None)


@register("math")
def maximum(x0, x1):
    """Elementwise maximum; on ties each input gets half the gradient (as PyTorch)."""
    return Extremum(True)(*binary("maximum", x0, x1, kinds="iuf"))


@register("math")
def minimum(x0, x1):
    """Elementwise minimum; on ties each input gets half the gradient (as PyTorch)."""
    return Extremum(False)(*binary("minimum", x0, x1, kinds="iuf"))


class Clip(Function):
    """Clip to [lo, hi]; inputs are (x, lo?, hi?) for the bounds that are given."""

    def __init__(self, has_lo, has_hi):
        self.has_lo = has_lo
        self.has_hi = has_hi

    def _split(self, xs):
        x, rest = xs[0], list(xs[1:])
        lo = rest.pop(0) if self.has_lo else None
        hi = rest.pop(0) if self.has_hi else None
        return x, lo, hi

    def forward(self, *xs):
        x, lo, hi = self._split(xs)
        return xp_of(x).clip(x, lo, hi)

    def backward(self, gy):
        x, lo, hi = self._split(self.inputs)
        a = x.data
        lo_a = None if lo is None else lo.data
        hi_a = None if hi is None else hi.data
        # PyTorch's clamp rules: x gets the gradient inside the closed interval; a bound gets
        # it where it is the one that was applied (hi wins when lo > hi).
        inside = True
        if lo is not None:
            inside = inside & (a >= lo_a)
        if hi is not None:
            inside = inside & (a <= hi_a)
        masks = [inside]
        if lo is not None:
            below = a < lo_a
            masks.append(below & (lo_a < hi_a) if hi is not None else below)
        if hi is not None:
            above = a > hi_a
            masks.append(above | (hi_a < lo_a) if lo is not None else above)
        return tuple(sum_to(gy * as_variable(m, dtype=gy.dtype), v.shape) if need else None
                     for m, v, need in zip(masks, self.inputs, self.needs_input_grad))


@register("math")
def clip(x, a_min=None, a_max=None):
    """Limit x to [a_min, a_max] (``numpy.clip`` names; either bound may be None).

    The bounds may be numbers, arrays or Variables and broadcast with x.  Gradients follow
    ``torch.clamp``: x gets 1 inside the closed interval, a bound gets 1 where it applied.
    """
    if a_min is None and a_max is None:
        raise ValueError("clip: a_min and a_max are both None; give at least one bound")
    names = ["x"] + ["a_min"] * (a_min is not None) + ["a_max"] * (a_max is not None)
    values = [v for v in (x, a_min, a_max) if v is not None]
    xs = operands("clip", names, values, kinds="iuf")
    broadcast_shape("clip", names, xs)
    return Clip(a_min is not None, a_max is not None)(*xs)


class Where(Function):
    def __init__(self, condition):
        self.condition = condition

    def forward(self, x, y):
        return xp_of(x, y).where(self.condition, x, y)

    def backward(self, gy):
        x, y = self.inputs
        n0, n1 = self.needs_input_grad
        c = self.condition
        return unbroadcast(self, Where(c)(gy, _zero(gy)) if n0 else None,
                      Where(c)(_zero(gy), gy) if n1 else None)


def _zero(like):
    return as_variable(xp_of(like.data).zeros((), like.dtype))


@register("math")
def where(condition, x, y):
    """x where ``condition`` is True, else y (``numpy.where``, broadcasting all three).

    ``condition`` is a boolean array or Variable and is never differentiated.
    """
    cond = condition.data if isinstance(condition, Variable) else condition
    if not hasattr(cond, "dtype") or cond.dtype.kind != "b":
        got = getattr(cond, "dtype", type(cond).__name__)
        raise TypeError(f"where: condition must be a boolean array or Variable, got {got}")
    x, y = operands("where", ("x", "y"), (x, y))
    cond = xp_of(x, y).asarray(cond)        # a NumPy mask may select between CuPy arrays
    broadcast_shape("where", ("condition", "x", "y"), (as_variable(cond), x, y))
    return Where(cond)(x, y)
