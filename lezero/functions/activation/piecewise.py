"""Activation functions, with ``torch.nn.functional``'s names, arguments and defaults.

Most activations act elementwise, so they share one small pattern (``_Elementwise``): a
subclass says how to compute ``f`` on raw arrays and gives the derivative ``f'`` written
with LeZero operators.  Backward multiplies the upstream gradient by that derivative, so
the gradient is itself a graph and can be differentiated again, to any order.

Piecewise activations (relu, hardtanh, ...) express the choice of piece as a *constant*
mask: its derivative is zero, which is the true derivative everywhere except at the kinks.
At a kink the gradient follows PyTorch's convention (relu'(0) = 0, hardtanh'(min) = 0).

GELU (fused, optional Numba kernel) lives in ``_gelu.py``; softmax, log_softmax and
gumbel_softmax in ``_softmax.py``; hardshrink, softshrink, threshold and rrelu in
``activation_shrink.py``; all are re-exported here.
"""
from lezero.core import Function
from lezero.functions._activation_utils import check_input, check_real
from lezero.functions.activation.gelu import gelu
from lezero.functions.activation.softmax import gumbel_softmax, log_softmax, softmax
from lezero.functions.common import check_float, data_of, mask_like, normalize_axis, xp_of
from lezero.functions.activation.shrink import hardshrink, rrelu, softshrink, threshold
from lezero.functions.math import tanh
from lezero.functions.registry import register
from lezero.functions.shape import get_item, reshape, sum_to

__all__ = ["relu", "relu6", "leaky_relu", "prelu", "elu", "selu", "celu", "gelu", "silu",
           "mish", "softplus", "softsign", "hardtanh", "hardsigmoid", "hardswish", "sigmoid",
           "logsigmoid", "tanhshrink", "softmax", "log_softmax", "gumbel_softmax", "glu",
           "hardshrink", "softshrink", "threshold", "rrelu"]

# SELU's constants (Klambauer et al., 2017), as PyTorch uses them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class _Elementwise(Function):
    """``y = f(x)`` elementwise.  Subclasses define

    ``f(self, xp, x)``  the value on a raw array (NumPy or CuPy, via ``xp``), and
    ``df(self, x, y)``  f'(x) as a Variable built from LeZero operators on the input ``x``
                        and, where that is cheaper, the output ``y``.

    Keyword arguments of the constructor (alpha, beta, ...) become attributes.
    """

    def __init__(self, **params):
        self.__dict__.update(params)

    def forward(self, x):
        return self.f(xp_of(x), x)

    def backward(self, gy):
        return gy * self.df(self.inputs[0], self.outputs[0]())


def _stable_sigmoid(xp, x):
    """1 / (1 + e^-x) without overflow: only e^-|x| (which is <= 1) is ever computed."""
    z = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + z), z / (1 + z))


def _softplus_array(xp, z):
    """log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow for large z, exact for small."""
    return xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


# ----- piecewise linear -----------------------------------------------------------------

class ReLU(_Elementwise):
    def f(self, xp, x):
        return xp.maximum(x, 0)

    def df(self, x, y):
        return mask_like(x, x.data > 0)


class LeakyReLU(_Elementwise):
    def f(self, xp, x):
        return xp.where(x > 0, x, x * self.slope)

    def df(self, x, y):
        pos = mask_like(x, x.data > 0)
        return pos + (1 - pos) * self.slope


class HardTanh(_Elementwise):
    """clip(x, lo, hi); relu6 is HardTanh(0, 6)."""

    def f(self, xp, x):
        return xp.clip(x, self.lo, self.hi)

    def df(self, x, y):
        return mask_like(x, (x.data > self.lo) & (x.data < self.hi))


class HardSigmoid(_Elementwise):
    def f(self, xp, x):
        return xp.clip(x / 6 + 0.5, 0, 1)

    def df(self, x, y):
        return mask_like(x, (x.data > -3) & (x.data < 3)) / 6


class HardSwish(_Elementwise):
    """x * relu6(x + 3) / 6: 0 below -3, x above 3, a parabola between."""

    def f(self, xp, x):
        return x * xp.clip(x + 3, 0, 6) / 6

    def df(self, x, y):
        middle = mask_like(x, (x.data >= -3) & (x.data <= 3))
        return middle * (x / 3 + 0.5) + mask_like(x, x.data > 3)


# ----- exponential family ---------------------------------------------------------------

class ELU(_Elementwise):
    """scale * (x if x > 0 else alpha * (e^x - 1)); SELU is ELU with fixed alpha, scale."""

    def f(self, xp, x):
        neg = self.alpha * xp.expm1(xp.minimum(x, 0))   # minimum: no overflow on the dead side
        return self.scale * xp.where(x > 0, x, neg)

    def df(self, x, y):
        # On the negative side d/dx alpha*(e^x - 1) = alpha*e^x = y/scale + alpha.
        pos = mask_like(x, x.data > 0)
        return self.scale * (pos + (1 - pos) * (y / self.scale + self.alpha))


class CELU(_Elementwise):
    """max(0, x) + min(0, alpha * (e^(x/alpha) - 1))."""

    def f(self, xp, x):
        return xp.where(x > 0, x, self.alpha * xp.expm1(xp.minimum(x, 0) / self.alpha))

    def df(self, x, y):
        pos = mask_like(x, x.data > 0)
        return pos + (1 - pos) * (y / self.alpha + 1)    # e^(x/alpha) = y/alpha + 1


class Sigmoid(_Elementwise):
    def f(self, xp, x):
        return _stable_sigmoid(xp, x)

    def df(self, x, y):
        return y * (1 - y)


class LogSigmoid(_Elementwise):
    """log(sigmoid(x)) = -softplus(-x), computed without overflow."""

    def f(self, xp, x):
        return -_softplus_array(xp, -x)

    def df(self, x, y):
        return sigmoid(-x)


class Softplus(_Elementwise):
    """log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (as PyTorch)."""

    def f(self, xp, x):
        z = x * self.beta
        return xp.where(z > self.threshold, x, _softplus_array(xp, z) / self.beta)

    def df(self, x, y):
        linear = mask_like(x, x.data * self.beta > self.threshold)
        return linear + (1 - linear) * sigmoid(x * self.beta)


class SiLU(_Elementwise):
    """x * sigmoid(x) (also called swish)."""

    def f(self, xp, x):
        return x * _stable_sigmoid(xp, x)

    def df(self, x, y):
        s = sigmoid(x)
        return s * (1 + x * (1 - s))


class Mish(_Elementwise):
    """x * tanh(softplus(x))."""

    def f(self, xp, x):
        return x * xp.tanh(_softplus_array(xp, x))

    def df(self, x, y):
        t = tanh(softplus(x))
        return t + x * sigmoid(x) * (1 - t * t)


# ----- rational and tanh-based -------------------------------------------------------------

class Softsign(_Elementwise):
    """x / (1 + |x|)."""

    def f(self, xp, x):
        return x / (1 + xp.abs(x))

    def df(self, x, y):
        a = 1 + x * mask_like(x, xp_of(x).sign(x.data))     # 1 + |x|, |x| = x * sign(x)
        return 1 / (a * a)


class TanhShrink(_Elementwise):
    """x - tanh(x)."""

    def f(self, xp, x):
        return x - xp.tanh(x)

    def df(self, x, y):
        t = tanh(x)
        return t * t


# ----- public wrappers ------------------------------------------------------------------

@register("activation")
def relu(input):
    """max(input, 0); the gradient at 0 is 0, as in PyTorch."""
    return ReLU()(check_input("relu", input))


@register("activation")
def relu6(input):
    """min(max(input, 0), 6)."""
    return HardTanh(lo=0.0, hi=6.0)(check_input("relu6", input))


@register("activation")
def leaky_relu(input, negative_slope=0.01):
    """input where positive, ``negative_slope * input`` elsewhere."""
    slope = check_real("leaky_relu", "negative_slope", negative_slope)
    return LeakyReLU(slope=slope)(check_input("leaky_relu", input))


@register("activation")
def hardtanh(input, min_val=-1.0, max_val=1.0):
    """clip(input, min_val, max_val); zero gradient outside the open interval."""
    lo = check_real("hardtanh", "min_val", min_val)
    hi = check_real("hardtanh", "max_val", max_val)
    if lo > hi:
        raise ValueError(f"hardtanh: min_val ({lo}) must not be greater than max_val ({hi})")
    return HardTanh(lo=lo, hi=hi)(check_input("hardtanh", input))


@register("activation")
def hardsigmoid(input):
    """clip(input / 6 + 1/2, 0, 1)."""
    return HardSigmoid()(check_input("hardsigmoid", input))


@register("activation")
def hardswish(input):
    """input * relu6(input + 3) / 6 (MobileNetV3)."""
    return HardSwish()(check_input("hardswish", input))


@register("activation")
def elu(input, alpha=1.0):
    """input where positive, ``alpha * (exp(input) - 1)`` elsewhere."""
    alpha = check_real("elu", "alpha", alpha)
    return ELU(alpha=alpha, scale=1.0)(check_input("elu", input))


@register("activation")
def selu(input):
    """Scaled ELU with the self-normalising constants (alpha 1.6733, scale 1.0507)."""
    return ELU(alpha=SELU_ALPHA, scale=SELU_SCALE)(check_input("selu", input))


@register("activation")
def celu(input, alpha=1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); ``alpha`` must not be 0."""
    alpha = check_real("celu", "alpha", alpha)
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides the input), got 0")
    return CELU(alpha=alpha)(check_input("celu", input))


@register("activation")
def sigmoid(input):
    """1 / (1 + exp(-input)), finite and accurate for any magnitude."""
    return Sigmoid()(check_input("sigmoid", input))


@register("activation")
def logsigmoid(input):
    """log(sigmoid(input)) = -softplus(-input), finite for any magnitude."""
    return LogSigmoid()(check_input("logsigmoid", input))


@register("activation")
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * input)) / beta; linear where ``beta * input > threshold``."""
    beta = check_real("softplus", "beta", beta)
    threshold = check_real("softplus", "threshold", threshold)
    if beta == 0:
        raise ValueError("softplus: beta must not be 0 (it divides the result), got 0")
    return Softplus(beta=beta, threshold=threshold)(check_input("softplus", input))


@register("activation")
def silu(input):
    """input * sigmoid(input)."""
    return SiLU()(check_input("silu", input))


@register("activation")
def mish(input):
    """input * tanh(softplus(input))."""
    return Mish()(check_input("mish", input))


@register("activation")
def softsign(input):
    """input / (1 + |input|)."""
    return Softsign()(check_input("softsign", input))


@register("activation")
def tanhshrink(input):
    """input - tanh(input)."""
    return TanhShrink()(check_input("tanhshrink", input))


# ----- operators with more than one input, or built from others -------------------------

class PReLU(Function):
    """input where positive, ``weight * input`` elsewhere; ``weight`` has one entry, or
    one per channel (axis 1), broadcast over the other axes."""

    def forward(self, x, w):
        # One weight acts as a scalar; C weights line up with axis 1: shape (1, C, 1, ...).
        self.w_shape = () if w.size == 1 else (1, w.size) + (1,) * (x.ndim - 2)
        return xp_of(x).where(x > 0, x, x * w.reshape(self.w_shape))

    def backward(self, gy):
        x, w = self.inputs
        pos = mask_like(x, x.data > 0)
        gx = gw = None
        if self.needs_input_grad[0]:
            gx = gy * (pos + (1 - pos) * reshape(w, self.w_shape))
        if self.needs_input_grad[1]:
            gw = reshape(sum_to(gy * x * (1 - pos), self.w_shape), w.shape)
        return gx, gw


@register("activation")
def prelu(input, weight):
    """Leaky ReLU with a learnt slope: ``weight`` is a scalar or 1-D with 1 or C entries,
    C = input.shape[1] (the channel axis, as in PyTorch; 1 for 1-D input)."""
    x = check_float("prelu", "input", input)
    w = check_float("prelu", "weight", weight)
    if x.ndim == 0:
        raise ValueError("prelu: input must have at least 1 dim, got a 0-dim array")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.ndim > 1 or w.size not in (1, channels):
        raise ValueError(f"prelu: weight must be a scalar or 1-D with 1 or {channels} "
                         f"(channels) entries for input of shape {x.shape}, "
                         f"got shape {w.shape}")
    if w.dtype != x.dtype:
        raise TypeError(f"prelu: weight dtype {w.dtype} differs from input dtype {x.dtype}")
    return PReLU()(input, weight)


@register("activation")
def glu(input, axis=-1):
    """Gated linear unit: split ``input`` in halves a, b along ``axis``; a * sigmoid(b)."""
    x = check_input("glu", input)
    ax = normalize_axis("glu", axis, data_of(x).ndim)
    n = data_of(x).shape[ax] if data_of(x).ndim else 0
    if n % 2 or n == 0:
        raise ValueError(f"glu: the size of axis {axis} must be even and positive, "
                         f"got {n} (input shape {data_of(x).shape})")
    before = (slice(None),) * ax
    a = get_item(x, before + (slice(0, n // 2),))
    b = get_item(x, before + (slice(n // 2, n),))
    return a * sigmoid(b)

