"""Shrinkage, threshold and randomized activations: ``hardshrink``, ``softshrink``,
``threshold`` and ``rrelu``, with ``torch.nn.functional``'s names, arguments and defaults.

All three are piecewise with slope 1 or 0, so each is one small ``Function`` whose
backward multiplies the upstream gradient by a *constant* mask (1 where the input passes
through, shifted or not; 0 where it is replaced).  The mask's derivative is zero, which
is the true second derivative everywhere except at the kinks, so double backward works.

The pieces and the kinks follow PyTorch exactly, NaN included: an input equal to
``lambd`` (or ``threshold``) is replaced and gets a zero gradient, and a NaN input stays
NaN and passes its gradient through.

``rrelu`` multiplies the input by a slope array fixed in the wrapper (1 for positive
inputs, a random or the mean negative slope elsewhere) with dropout's ``ScaleShift``: its
gradient is that same constant array.
"""
import math

from lezero.random import get_rng
from lezero.functions.activation.piecewise import mask
from lezero.functions.common import xp_of
from lezero.functions.math import Elementwise
from lezero.functions.registry import register
from lezero.functions.stochastic import ScaleShift
from lezero.utils.checks import check_float_array, check_real, check_training

__all__ = ["hardshrink", "softshrink", "threshold", "rrelu"]


class _PassMask(Elementwise):
    """``y = f(x)`` elementwise with ``f'`` equal to 1 where ``passes`` and 0 elsewhere.

    Subclasses define ``f(self, xp, x)`` on raw arrays and ``passes(self, xp, x)``, the
    boolean array of inputs that go through with slope 1.
    """

    def derivative(self, gy, x, y):
        return gy * mask(x, self.passes(xp_of(x.data), x.data))


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
    return HardShrink.apply_to("hardshrink", input, lambd=lambd)


@register("activation")
def softshrink(input, lambd=0.5):
    """``input`` moved ``lambd`` towards 0, and 0 where ``|input| <= lambd``;
    ``lambd`` must be non-negative."""
    lambd = check_real("softshrink", "lambd", lambd)
    if not lambd >= 0:
        raise ValueError(f"softshrink: lambd must be non-negative, got {lambd}")
    return SoftShrink.apply_to("softshrink", input, lambd=lambd)


@register("activation")
def threshold(input, threshold, value):
    """``input`` where ``input > threshold``, ``value`` elsewhere."""
    limit = check_real("threshold", "threshold", threshold)
    value = check_real("threshold", "value", value)
    return Threshold.apply_to("threshold", input, threshold=limit, value=value)


@register("activation")
def rrelu(input, lower=1 / 8, upper=1 / 3, training=None):
    """Randomized leaky ReLU: ``input`` where positive, ``slope * input`` elsewhere.

    In training the slope is drawn uniformly from [lower, upper) for every element, from
    the process generator (``lz.manual_seed`` reproduces it); otherwise it is the mean
    (lower + upper) / 2, which makes rrelu a leaky_relu.  ``training=None`` follows
    ``lz.Config.train``.  The gradient is the slope used (1 for positive inputs).
    """
    lower = check_real("rrelu", "lower", lower)
    upper = check_real("rrelu", "upper", upper)
    if not (math.isfinite(lower) and math.isfinite(upper) and lower <= upper):
        raise ValueError(f"rrelu: lower and upper must be finite with lower <= upper, got "
                         f"lower={lower}, upper={upper}")
    arr = check_float_array("rrelu", "input", input)
    xp = xp_of(arr)
    if check_training("rrelu", training):
        noise = get_rng(xp).random(arr.shape, dtype="float32").astype(arr.dtype)
        negative_slope = lower + (upper - lower) * noise
    else:
        negative_slope = xp.asarray((lower + upper) / 2, dtype=arr.dtype)
    # "> 0" as leaky_relu: zero and NaN take the negative slope, as in PyTorch's eval mode.
    slope = xp.where(arr > 0, xp.ones((), dtype=arr.dtype), negative_slope)
    return ScaleShift(slope.astype(arr.dtype, copy=False))(input)
