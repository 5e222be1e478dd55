"""Activation layers: each wraps one ``lezero.functions`` activation, as ``torch.nn`` does.

Most are made by ``_activation`` (``op_module``) from a short argument spec: PyTorch's
constructor arguments (name, default, kind) become attributes, are checked once in the
constructor, and are handed to the operator in ``forward`` (a ``dim`` becomes ``axis``).
``inplace`` is accepted for PyTorch compatibility and has no effect: LeZero's operators
always return a new Variable, since backward may need the input as it was.
"""
import lezero.functions as F
from lezero.nn.layers._utils import REQUIRED, empty_parameter, op_module
from lezero.nn.module import Module
from lezero.utils.checks import check_int, check_number

_INPLACE = ("inplace", False, "bool")


def _activation(fn, *spec):
    """A base class for an activation layer applying ``fn`` (see ``op_module``)."""
    return op_module(fn, *spec)


def _implicit_dim(input):
    """PyTorch's legacy choice when a softmax is given no dim."""
    return 0 if input.ndim in (0, 1, 3) else 1


def _softmax(input, axis):
    return F.softmax(input, axis=_implicit_dim(input) if axis is None else axis)


def _log_softmax(input, axis):
    return F.log_softmax(input, axis=_implicit_dim(input) if axis is None else axis)


def _softmin(input, axis):
    return F.softmax(-input, axis=_implicit_dim(input) if axis is None else axis)


def _softmax2d(input):
    if input.ndim not in (3, 4):
        raise ValueError(f"expected (C, H, W) or (N, C, H, W) input, got shape {input.shape}")
    return F.softmax(input, axis=-3)


class ReLU(_activation(F.relu, _INPLACE)):
    """max(0, x), as ``torch.nn.ReLU``."""


class ReLU6(_activation(F.relu6, _INPLACE)):
    """min(max(0, x), 6), as ``torch.nn.ReLU6``."""


class LeakyReLU(_activation(F.leaky_relu, ("negative_slope", 0.01, "number"), _INPLACE)):
    """x for x > 0, negative_slope * x otherwise, as ``torch.nn.LeakyReLU``."""


class ELU(_activation(F.elu, ("alpha", 1.0, "number"), _INPLACE)):
    """x for x > 0, alpha * (exp(x) - 1) otherwise, as ``torch.nn.ELU``."""


class SELU(_activation(F.selu, _INPLACE)):
    """Scaled ELU with the self-normalising constants, as ``torch.nn.SELU``."""


class CELU(_activation(F.celu, ("alpha", 1.0, "number"), _INPLACE)):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), as ``torch.nn.CELU``."""

    def _validate(self):
        if self.alpha == 0:
            raise ValueError("CELU: alpha must not be 0")


class GELU(_activation(F.gelu, ("approximate", "none", ("none", "tanh")))):
    """x * Phi(x) (``approximate="tanh"``: the tanh formula), as ``torch.nn.GELU``."""


class SiLU(_activation(F.silu, _INPLACE)):
    """x * sigmoid(x), as ``torch.nn.SiLU``."""


class Mish(_activation(F.mish, _INPLACE)):
    """x * tanh(softplus(x)), as ``torch.nn.Mish``."""


class Softplus(_activation(F.softplus, ("beta", 1.0, "number"), ("threshold", 20.0, "number"))):
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``), as ``torch.nn.Softplus``."""


class Softsign(_activation(F.softsign)):
    """x / (1 + |x|), as ``torch.nn.Softsign``."""


class Hardtanh(_activation(F.hardtanh, ("min_val", -1.0, "number"), ("max_val", 1.0, "number"),
                           _INPLACE)):
    """x clipped to [min_val, max_val], as ``torch.nn.Hardtanh``."""

    def _validate(self):
        if self.max_val <= self.min_val:
            raise ValueError(f"Hardtanh: max_val ({self.max_val}) must be greater than "
                             f"min_val ({self.min_val})")


class Hardsigmoid(_activation(F.hardsigmoid, _INPLACE)):
    """clip(x / 6 + 1 / 2, 0, 1), as ``torch.nn.Hardsigmoid``."""


class Hardswish(_activation(F.hardswish, _INPLACE)):
    """x * hardsigmoid(x), as ``torch.nn.Hardswish``."""


class Sigmoid(_activation(F.sigmoid)):
    """1 / (1 + exp(-x)), as ``torch.nn.Sigmoid``."""


class LogSigmoid(_activation(F.logsigmoid)):
    """log(sigmoid(x)), computed stably, as ``torch.nn.LogSigmoid``."""


class Tanh(_activation(F.tanh)):
    """tanh(x), as ``torch.nn.Tanh``."""


class Tanhshrink(_activation(F.tanhshrink)):
    """x - tanh(x), as ``torch.nn.Tanhshrink``."""


class Hardshrink(_activation(F.hardshrink, ("lambd", 0.5, "number"))):
    """x where |x| > lambd, 0 elsewhere, as ``torch.nn.Hardshrink``."""


class Softshrink(_activation(F.softshrink, ("lambd", 0.5, "number"))):
    """x moved lambd towards 0 (0 where |x| <= lambd), as ``torch.nn.Softshrink``."""

    def _validate(self):
        if not self.lambd >= 0:
            raise ValueError(f"Softshrink: lambd must be non-negative, got {self.lambd}")


class Threshold(_activation(F.threshold, ("threshold", REQUIRED, "number"),
                            ("value", REQUIRED, "number"), _INPLACE)):
    """x where x > threshold, value elsewhere, as ``torch.nn.Threshold``."""


class Softmax(_activation(_softmax, ("dim", None, "int?"))):
    """Softmax along ``dim`` (None: PyTorch's legacy implicit choice), as
    ``torch.nn.Softmax``."""


class LogSoftmax(_activation(_log_softmax, ("dim", None, "int?"))):
    """log(softmax(x)) along ``dim``, computed stably, as ``torch.nn.LogSoftmax``."""


class Softmin(_activation(_softmin, ("dim", None, "int?"))):
    """softmax(-x) along ``dim``, as ``torch.nn.Softmin``."""


class Softmax2d(_activation(_softmax2d)):
    """Softmax over the channels of (N, C, H, W) or (C, H, W), as ``torch.nn.Softmax2d``."""


class GLU(_activation(F.glu, ("dim", -1, "int"))):
    """a * sigmoid(b) for the halves a, b of ``dim``, as ``torch.nn.GLU``."""


class RReLU(_activation(F.rrelu, ("lower", 1 / 8, "number"), ("upper", 1 / 3, "number"),
                         _INPLACE)):
    """Randomized leaky ReLU, as ``torch.nn.RReLU``: negative inputs are multiplied by a
    slope drawn uniformly from [lower, upper) per element in training mode, and by
    (lower + upper) / 2 after ``eval()``."""

    def _validate(self):
        if not self.lower <= self.upper:
            raise ValueError(f"RReLU: lower ({self.lower}) must not exceed upper "
                             f"({self.upper})")

    def _options(self):
        # The module's own mode decides, as for dropout (not lz.Config.train).
        return {**super()._options(), "training": self.training}


class PReLU(Module):
    """Leaky ReLU with a learnt slope ``weight`` of ``num_parameters`` entries (1, or one
    per channel of axis 1), initialised to ``init``, as ``torch.nn.PReLU``."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        check_int("PReLU", "num_parameters", num_parameters, low=1)
        self.num_parameters = num_parameters
        self.init = check_number("PReLU", "init", init)
        self.weight = empty_parameter(num_parameters)
        self.reset_parameters()

    def reset_parameters(self):
        self.weight.data[...] = self.init

    def forward(self, input):
        channels = input.shape[1] if input.ndim >= 2 else 1
        if self.num_parameters != 1 and channels != self.num_parameters:
            raise ValueError(f"PReLU: num_parameters={self.num_parameters} needs "
                             f"{self.num_parameters} channels on axis 1, got input shape "
                             f"{input.shape}")
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
