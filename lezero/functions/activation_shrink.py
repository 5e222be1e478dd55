"""Shrinkage and threshold activations: ``hardshrink``, ``softshrink`` and ``threshold``,
with ``torch.nn.functional``'s names, arguments and defaults.

All three are piecewise with slope 1 or 0, so each is one small ``Function`` whose
backward multiplies the upstream gradient by a *constant* mask (1 where the input passes
through, shifted or not; 0 where it is replaced).  The mask's derivative is zero, which
is the true second derivative everywhere except at the kinks, so double backward works.

The pieces and the kinks follow PyTorch exactly, NaN included: an input equal to
``lambd`` (or ``threshold``) is replaced and gets a zero gradient, and a NaN input stays
NaN and passes its gradient through.  They are re-exported by ``activation``.
"""
from lezero.core import Function
from lezero.functions._activation_utils import check_input, check_real
from lezero.functions._utils import mask_like, xp_of
from lezero.functions.registry import register

__all__ = ["hardshrink", "softshrink", "threshold"]


class _PassMask(Function):
    """``y = f(x)`` elementwise with ``f'`` equal to 1 where ``passes`` and 0 elsewhere.

    Subclasses define ``f(self, xp, x)`` on raw arrays and ``passes(self, xp, x)``, the
    boolean array of inputs that go through with slope 1.  Keyword arguments of the
    constructor (lambd, threshold, value) become attributes.
    """

    def __init__(self, **params):
        self.__dict__.update(params)

    def forward(self, x):
        return self.f(xp_of(x), x)

    def backward(self, gy):
        x = self.inputs[0]
        return gy * mask_like(x, self.passes(xp_of(x.data), x.data))


class HardShrink(_PassMask):
    """x where |x| > lambd, 0 elsewhere."""

    def f(self, xp, x):
        return xp.where(xp.abs(x) <= self.lambd, xp.zeros((), dtype=x.dtype), x)

    def passes(self, xp, x):
        return ~(xp.abs(x) <= self.lambd)      # "not <=": NaN passes, as in PyTorch


class SoftShrink(_PassMask):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""

    def f(self, xp, x):
        # x * 0 (rather than 0) in the middle: a NaN input stays NaN, as in PyTorch.
        return xp.where(x > self.lambd, x - self.lambd,
                        xp.where(x < -self.lambd, x + self.lambd, x * 0))

    def passes(self, xp, x):
        return ~(xp.abs(x) <= self.lambd)


class Threshold(_PassMask):
    """x where x > threshold, ``value`` elsewhere."""

    def f(self, xp, x):
        return xp.where(x <= self.threshold, xp.asarray(self.value, dtype=x.dtype), x)

    def passes(self, xp, x):
        return ~(x <= self.threshold)


@register("activation")
def hardshrink(input, lambd=0.5):
    """``input`` where ``|input| > lambd``, 0 elsewhere (zero gradient at ``|input| == lambd``)."""
    lambd = check_real("hardshrink", "lambd", lambd)
    return HardShrink(lambd=lambd)(check_input("hardshrink", input))


@register("activation")
def softshrink(input, lambd=0.5):
    """``input`` moved ``lambd`` towards 0, and 0 where ``|input| <= lambd``;
    ``lambd`` must be non-negative."""
    lambd = check_real("softshrink", "lambd", lambd)
    if not lambd >= 0:
        raise ValueError(f"softshrink: lambd must be non-negative, got {lambd}")
    return SoftShrink(lambd=lambd)(check_input("softshrink", input))


@register("activation")
def threshold(input, threshold, value):
    """``input`` where ``input > threshold``, ``value`` elsewhere."""
    limit = check_real("threshold", "threshold", threshold)
    value = check_real("threshold", "value", value)
    return Threshold(threshold=limit, value=value)(check_input("threshold", input))
