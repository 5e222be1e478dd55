"""GELU as two fused Functions (re-exported by ``activation``).

``GELU`` computes x * Phi(x) in one call; its backward is ``GELUGrad``, which computes
``gy * gelu'(x)`` in one call instead of a chain of small operators.  ``GELUGrad``'s own
backward is written with LeZero operators (and GELUGrad itself), so GELU can be
differentiated to any order.

approximate="none":  gelu(x) = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2))
approximate="tanh":  gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))

The array work is ``lezero.kernels.gelu``: Numba kernels for float32 NumPy arrays where
``lezero.kernels.enabled`` allows, its NumPy reference (also the CuPy and float64 path)
otherwise.
"""
from lezero.kernels import gelu as gelu_kernels
from lezero.core import Function
from lezero.functions.math import exp, tanh
from lezero.functions.registry import register
from lezero.utils.checks import check_float_array

__all__ = ["gelu"]

INV_SQRT_2PI, TANH_C, TANH_K = gelu_kernels.INV_SQRT_2PI, gelu_kernels.TANH_C, gelu_kernels.TANH_K


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
    reads_outputs = False

    def __init__(self, approximate):
        self.approximate = approximate

    def forward(self, x):
        return gelu_kernels.gelu(x, self.approximate)

    def backward(self, gy):
        return GELUGrad(self.approximate)(self.inputs[0], gy)


class GELUGrad(Function):
    """(x, gy) -> gy * gelu'(x), fused; linear in gy, so its gy-gradient is GELUGrad again."""

    def __init__(self, approximate):
        self.approximate = approximate

    def forward(self, x, gy):
        return gelu_kernels.gelu_grad(x, gy, self.approximate)

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
