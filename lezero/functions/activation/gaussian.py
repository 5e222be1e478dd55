"""GELU as two fused Functions (re-exported by ``activation``).

``GELU`` computes x * Phi(x) in one call; its backward is ``GELUGrad``, which computes
``gy * gelu'(x)`` in one call instead of a chain of small operators.  ``GELUGrad``'s own
backward is written with LeZero operators (and GELUGrad itself), so GELU can be
differentiated to any order.

approximate="none":  gelu(x) = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2))
approximate="tanh":  gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))

On float32 NumPy arrays both forms run Numba kernels (``lezero.kernels.gelu``) when
``lezero.kernels.enabled`` allows; ``gelu_array`` and ``gelu_grad_array`` below are the
reference it is tested against, and the path for CuPy and float64.
"""
import math

import numpy as np

from lezero import kernels
from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.math import exp, tanh
from lezero.functions.registry import register
from lezero.utils.checks import check_float_array

__all__ = ["gelu"]

SQRT_HALF = 1 / math.sqrt(2)
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
TANH_C = math.sqrt(2 / math.pi)
TANH_K = 0.044715


def _erf(xp):
    """scipy's erf for NumPy arrays, cupyx's for CuPy arrays (same dtype out as in)."""
    if xp is np:
        from scipy.special import erf
    else:
        from cupyx.scipy.special import erf
    return erf


def gelu_array(x, approximate):
    """GELU of a raw array (reference implementation, NumPy or CuPy)."""
    xp = xp_of(x)
    if approximate == "tanh":
        return 0.5 * x * (1 + xp.tanh(TANH_C * (x + TANH_K * x * x * x)))
    return 0.5 * x * (1 + _erf(xp)(x * SQRT_HALF))


def gelu_grad_array(x, gy, approximate):
    """gy * gelu'(x) on raw arrays (reference implementation)."""
    xp = xp_of(x)
    if approximate == "tanh":
        t = xp.tanh(TANH_C * (x + TANH_K * x * x * x))     # x * x * x: ** 3 is a slow pow
        du = TANH_C * (1 + 3 * TANH_K * x * x)
        return gy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du)
    cdf = 0.5 * (1 + _erf(xp)(x * SQRT_HALF))
    pdf = xp.exp(-0.5 * x * x) * INV_SQRT_2PI
    return gy * (cdf + x * pdf)


def _use_kernel(approximate, *arrays):
    return all(a.dtype == np.float32 for a in arrays) and kernels.enabled(*arrays)


def _second_derivative(x, approximate):
    """gelu''(x) as a LeZero graph on the Variable ``x`` (differentiable again)."""
    if approximate == "tanh":
        # u = c (x + k x^3), t = tanh(u):  gelu'' = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)).
        t = tanh(TANH_C * (x + TANH_K * x ** 3))
        du = TANH_C * (1 + 3 * TANH_K * x * x)
        d2u = 6 * TANH_C * TANH_K * x
        return (1 - t * t) * (du + 0.5 * x * (d2u - 2 * t * du * du))
    # gelu' = Phi + x phi and phi' = -x phi, so gelu'' = phi (2 - x^2).
    return exp(-0.5 * x * x) * INV_SQRT_2PI * (2 - x * x)


class GELU(Function):
    def __init__(self, approximate):
        self.approximate = approximate

    def forward(self, x):
        if _use_kernel(self.approximate, x):
            from lezero.kernels.gelu import gelu_forward
            return gelu_forward(x, self.approximate)
        return gelu_array(x, self.approximate)

    def backward(self, gy):
        return GELUGrad(self.approximate)(self.inputs[0], gy)


class GELUGrad(Function):
    """(x, gy) -> gy * gelu'(x), fused; linear in gy, so its gy-gradient is GELUGrad again."""

    def __init__(self, approximate):
        self.approximate = approximate

    def forward(self, x, gy):
        if _use_kernel(self.approximate, x, gy):
            from lezero.kernels.gelu import gelu_backward
            return gelu_backward(x, gy, self.approximate)
        return gelu_grad_array(x, gy, self.approximate)

    def backward(self, ggx):
        x, gy = self.inputs
        gx = ggy = None
        if self.needs_input_grad[0]:
            gx = ggx * gy * _second_derivative(x, self.approximate)
        if self.needs_input_grad[1]:
            ggy = GELUGrad(self.approximate)(x, ggx)
        return gx, ggy


@register("activation", kernels=("numpy", "cupy", "numba"))
def gelu(input, approximate="none"):
    """Gaussian error linear unit: input * Phi(input), Phi the standard normal CDF.

    ``approximate="tanh"`` uses the tanh formula of Hendrycks & Gimpel, as PyTorch does.
    """
    check_float_array("gelu", "input", input)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return GELU(approximate)(input)
