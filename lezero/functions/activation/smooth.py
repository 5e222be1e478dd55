"""Smooth activations: elu selu celu sigmoid logsigmoid softplus silu mish softsign
tanhshrink, and glu (a gate over two halves of the input).

Each elementwise one is an ``Elementwise`` (``lezero.functions.math``); the values are
computed without overflow for inputs of any magnitude (only e^-|x| is ever taken where
e^x could overflow), and the gradients are written with LeZero operators, so they
differentiate to any order.
"""
from lezero.functions.activation.piecewise import mask
from lezero.functions.common import xp_of
from lezero.functions.math import Elementwise, float_operator, tanh
from lezero.functions.registry import register
from lezero.functions.shape import get_item
from lezero.utils.checks import check_axis, check_float_array, check_real

__all__ = ["elu", "selu", "celu", "sigmoid", "logsigmoid", "softplus", "silu", "mish",
           "softsign", "tanhshrink", "glu"]

# SELU's constants (Klambauer et al., 2017), as PyTorch uses them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _stable_sigmoid(xp, x):
    """1 / (1 + e^-x) without overflow: only e^-|x| (which is <= 1) is ever computed."""
    z = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + z), z / (1 + z))


def _softplus_array(xp, z):
    """log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow for large z, exact for small."""
    return xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


class ELU(Elementwise):
    """scale * (x if x > 0 else alpha * (e^x - 1)); SELU is ELU with fixed alpha, scale."""

    def f(self, xp, x):
        neg = self.alpha * xp.expm1(xp.minimum(x, 0))   # minimum: no overflow on the dead side
        return self.scale * xp.where(x > 0, x, neg)

    def derivative(self, gy, x, y):
        # On the negative side d/dx alpha*(e^x - 1) = alpha*e^x = y/scale + alpha.
        pos = mask(x, x.data > 0)
        return gy * (self.scale * (pos + (1 - pos) * (y / self.scale + self.alpha)))


class CELU(Elementwise):
    """max(0, x) + min(0, alpha * (e^(x/alpha) - 1))."""

    def f(self, xp, x):
        return xp.where(x > 0, x, self.alpha * xp.expm1(xp.minimum(x, 0) / self.alpha))

    def derivative(self, gy, x, y):
        pos = mask(x, x.data > 0)
        return gy * (pos + (1 - pos) * (y / self.alpha + 1))    # e^(x/alpha) = y/alpha + 1


class Sigmoid(Elementwise):
    def f(self, xp, x):
        return _stable_sigmoid(xp, x)

    def derivative(self, gy, x, y):
        return gy * (y * (1 - y))


class LogSigmoid(Elementwise):
    """log(sigmoid(x)) = -softplus(-x), computed without overflow."""

    def f(self, xp, x):
        return -_softplus_array(xp, -x)

    def derivative(self, gy, x, y):
        return gy * sigmoid(-x)


class Softplus(Elementwise):
    """log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (as PyTorch)."""

    def f(self, xp, x):
        z = x * self.beta
        return xp.where(z > self.threshold, x, _softplus_array(xp, z) / self.beta)

    def derivative(self, gy, x, y):
        linear = mask(x, x.data * self.beta > self.threshold)
        return gy * (linear + (1 - linear) * sigmoid(x * self.beta))


class SiLU(Elementwise):
    """x * sigmoid(x) (also called swish)."""

    def f(self, xp, x):
        return x * _stable_sigmoid(xp, x)

    def derivative(self, gy, x, y):
        s = sigmoid(x)
        return gy * (s * (1 + x * (1 - s)))


class Mish(Elementwise):
    """x * tanh(softplus(x))."""

    def f(self, xp, x):
        return x * xp.tanh(_softplus_array(xp, x))

    def derivative(self, gy, x, y):
        t = tanh(softplus(x))
        return gy * (t + x * sigmoid(x) * (1 - t * t))


class Softsign(Elementwise):
    """x / (1 + |x|)."""

    def f(self, xp, x):
        return x / (1 + xp.abs(x))

    def derivative(self, gy, x, y):
        a = 1 + x * mask(x, xp_of(x).sign(x.data))     # 1 + |x|, |x| = x * sign(x)
        return gy * (1 / (a * a))


class TanhShrink(Elementwise):
    """x - tanh(x)."""

    def f(self, xp, x):
        return x - xp.tanh(x)

    def derivative(self, gy, x, y):
        t = tanh(x)
        return gy * (t * t)


@register("activation")
def elu(input, alpha=1.0):
    """input where positive, ``alpha * (exp(input) - 1)`` elsewhere."""
    alpha = check_real("elu", "alpha", alpha)
    return ELU.apply_to("elu", input, alpha=alpha, scale=1.0)


selu = float_operator("activation", "selu", ELU, "Scaled ELU with the self-normalising "
                      "constants (alpha 1.6733, scale 1.0507).", alpha=SELU_ALPHA,
                      scale=SELU_SCALE)
sigmoid = float_operator("activation", "sigmoid", Sigmoid,
                         "1 / (1 + exp(-input)), finite and accurate for any magnitude.")
logsigmoid = float_operator("activation", "logsigmoid", LogSigmoid,
                            "log(sigmoid(input)) = -softplus(-input), finite for any magnitude.")
silu = float_operator("activation", "silu", SiLU, "input * sigmoid(input).")
mish = float_operator("activation", "mish", Mish, "input * tanh(softplus(input)).")
softsign = float_operator("activation", "softsign", Softsign, "input / (1 + |input|).")
tanhshrink = float_operator("activation", "tanhshrink", TanhShrink, "input - tanh(input).")


@register("activation")
def celu(input, alpha=1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); ``alpha`` must not be 0."""
    alpha = check_real("celu", "alpha", alpha)
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides the input), got 0")
    return CELU.apply_to("celu", input, alpha=alpha)


@register("activation")
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * input)) / beta; linear where ``beta * input > threshold``."""
    beta = check_real("softplus", "beta", beta)
    threshold = check_real("softplus", "threshold", threshold)
    if beta == 0:
        raise ValueError("softplus: beta must not be 0 (it divides the result), got 0")
    return Softplus.apply_to("softplus", input, beta=beta, threshold=threshold)


@register("activation")
def glu(input, axis=-1):
    """Gated linear unit: split ``input`` in halves a, b along ``axis``; a * sigmoid(b)."""
    arr = check_float_array("glu", "input", input)
    ax = check_axis("glu", axis, arr.ndim)
    n = arr.shape[ax] if arr.ndim else 0
    if n % 2 or n == 0:
        raise ValueError(f"glu: the size of axis {axis} must be even and positive, "
                         f"got {n} (input shape {arr.shape})")
    before = (slice(None),) * ax
    a = get_item(input, before + (slice(0, n // 2),))
    b = get_item(input, before + (slice(n // 2, n),))
    return a * sigmoid(b)
