"""Piecewise-linear activations: relu relu6 leaky_relu hardtanh hardsigmoid hardswish prelu.

Each is an ``Elementwise`` (``lezero.functions.math``): the value on raw arrays and the
gradient written with LeZero operators.  The choice of piece is a *constant* mask: its
derivative is zero, which is the true derivative everywhere except at the kinks.  At a
kink the gradient follows PyTorch's convention (relu'(0) = 0, hardtanh'(min) = 0).
"""
from lezero.core import Function
from lezero.kernels import relu as relu_kernels
from lezero.functions.common import as_variable, mixed_precision, xp_of
from lezero.functions.math import Elementwise, float_operator
from lezero.functions.registry import register
from lezero.functions.shape import reshape, sum_to
from lezero.utils.checks import check_float_array, check_real

__all__ = ["relu", "relu6", "leaky_relu", "hardtanh", "hardsigmoid", "hardswish", "prelu"]


def mask(x, condition):
    """The constant 0/1 array of ``condition`` in ``x``'s dtype."""
    return as_variable(condition, dtype=x.dtype)


class ReLU(Elementwise):
    """Keeps its output, not its input (y > 0 exactly where x > 0): the output is what
    the next operator keeps anyway, so a conv-bn-relu chain holds no extra array."""

    save_inputs, reads_outputs = (), False

    def f(self, xp, x):
        self.y = relu_kernels.relu(x)       # a Numba select for float NumPy arrays
        return self.y

    def backward_arrays(self, gy):
        """First order: the kernel's array, unrecorded."""
        return relu_kernels.relu_grad(self.y, gy)

    def backward(self, gy):
        return ReLUGrad()(self.y, gy)


class ReLUGrad(Function):
    """(x, gy) -> gy where x > 0, else 0, in one pass (``lezero.kernels.relu``).  Linear
    in gy, so its gy-gradient is ReLUGrad again; in x it is zero (a constant mask)."""

    def forward(self, x, gy):
        return relu_kernels.relu_grad(x, gy)

    def backward(self, ggx):
        return None, ReLUGrad()(self.inputs[0], ggx) if self.needs_input_grad[1] else None


class LeakyReLU(Elementwise):
    def f(self, xp, x):
        return xp.where(x > 0, x, x * self.slope)

    def derivative(self, gy, x, y):
        pos = mask(x, x.data > 0)
        return gy * (pos + (1 - pos) * self.slope)


class HardTanh(Elementwise):
    """clip(x, lo, hi); relu6 is HardTanh(0, 6)."""

    def f(self, xp, x):
        return xp.clip(x, self.lo, self.hi)

    def derivative(self, gy, x, y):
        return gy * mask(x, (x.data > self.lo) & (x.data < self.hi))


class HardSigmoid(Elementwise):
    def f(self, xp, x):
        return xp.clip(x / 6 + 0.5, 0, 1)

    def derivative(self, gy, x, y):
        return gy * (mask(x, (x.data > -3) & (x.data < 3)) / 6)


class HardSwish(Elementwise):
    """x * relu6(x + 3) / 6: 0 below -3, x above 3, a parabola between."""

    def f(self, xp, x):
        return x * xp.clip(x + 3, 0, 6) / 6

    def derivative(self, gy, x, y):
        middle = mask(x, (x.data >= -3) & (x.data <= 3))
        return gy * (middle * (x / 3 + 0.5) + mask(x, x.data > 3))


relu = float_operator("activation", "relu", ReLU,
                      "max(input, 0); the gradient at 0 is 0, as in PyTorch.",
                      kernels=("numpy", "cupy", "numba"))
relu6 = float_operator("activation", "relu6", HardTanh, "min(max(input, 0), 6).",
                       lo=0.0, hi=6.0)
hardsigmoid = float_operator("activation", "hardsigmoid", HardSigmoid,
                             "clip(input / 6 + 1/2, 0, 1).")
hardswish = float_operator("activation", "hardswish", HardSwish,
                           "input * relu6(input + 3) / 6 (MobileNetV3).")


@register("activation")
def leaky_relu(input, negative_slope=0.01):
    """input where positive, ``negative_slope * input`` elsewhere."""
    slope = check_real("leaky_relu", "negative_slope", negative_slope)
    return LeakyReLU.apply_to("leaky_relu", input, slope=slope)


@register("activation")
def hardtanh(input, min_val=-1.0, max_val=1.0):
    """clip(input, min_val, max_val); zero gradient outside the open interval."""
    lo = check_real("hardtanh", "min_val", min_val)
    hi = check_real("hardtanh", "max_val", max_val)
    if lo > hi:
        raise ValueError(f"hardtanh: min_val ({lo}) must not be greater than max_val ({hi})")
    return HardTanh.apply_to("hardtanh", input, lo=lo, hi=hi)


class PReLU(Function):
    """input where positive, ``weight * input`` elsewhere; ``weight`` has one entry, or
    one per channel (axis 1), broadcast over the other axes."""

    def forward(self, x, w):
        # One weight acts as a scalar; C weights line up with axis 1: shape (1, C, 1, ...).
        self.w_shape = () if w.size == 1 else (1, w.size) + (1,) * (x.ndim - 2)
        return xp_of(x).where(x > 0, x, x * w.reshape(self.w_shape))

    def backward(self, gy):
        x, w = self.inputs
        pos = mask(x, x.data > 0)
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
    x = check_float_array("prelu", "input", input)
    w = check_float_array("prelu", "weight", weight)
    if x.ndim == 0:
        raise ValueError("prelu: input must have at least 1 dim, got a 0-dim array")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.ndim > 1 or w.size not in (1, channels):
        raise ValueError(f"prelu: weight must be a scalar or 1-D with 1 or {channels} "
                         f"(channels) entries for input of shape {x.shape}, "
                         f"got shape {w.shape}")
    if w.dtype != x.dtype and not mixed_precision(x.dtype, w.dtype):
        raise TypeError(f"prelu: weight dtype {w.dtype} differs from input dtype {x.dtype}")
    return PReLU()(input, weight)
