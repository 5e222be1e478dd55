"""Building blocks of torchvision's models, with ``torchvision.ops``' names and layouts.

``Conv2dNormActivation`` (convolution, norm, activation as one Sequential: keys ``0``,
``1``), ``SqueezeExcitation`` (``fc1``, ``fc2`` 1x1 convolutions), ``StochasticDepth``
(drop a residual branch per sample), ``Permute`` and ``LayerNorm2d`` (ConvNeXt's layer
norm over the channels of an NCHW map).  Each composes existing operators, so its gradient
is theirs.
"""
import lezero.functions as F
from lezero import cuda
from lezero.core import Variable
from lezero.random import get_rng
from lezero.nn.containers import Sequential
from lezero.nn.layers.activation import ReLU, Sigmoid
from lezero.nn.layers.conv import Conv2d
from lezero.nn.layers.normalization import BatchNorm2d, LayerNorm
from lezero.nn.layers.pooling import AdaptiveAvgPool2d
from lezero.nn.module import Module
from lezero.utils.checks import (check_bool, check_callable, check_choice, check_int,
                                 check_number, check_type, ntuple)

__all__ = ["stochastic_depth", "StochasticDepth", "Permute", "LayerNorm2d",
           "Conv2dNormActivation", "SqueezeExcitation"]


def stochastic_depth(input, p, mode, training=True):
    """Zero the whole ``input`` (``mode="batch"``) or whole samples of it (``"row"``)
    with probability ``p`` and scale what is kept by 1 / (1 - p), as
    ``torchvision.ops.stochastic_depth``; the identity when not training or ``p == 0``.
    The noise comes from LeZero's generator (``lz.manual_seed`` reproduces it)."""
    p = check_number("stochastic_depth", "p", p, 0.0, 1.0)
    check_choice("stochastic_depth", "mode", mode, ("batch", "row"))
    check_bool("stochastic_depth", "training", training)
    if not training or p == 0.0:
        return input
    data = input.data if isinstance(input, Variable) else input
    xp = cuda.get_array_module(data)
    size = (data.shape[0],) + (1,) * (data.ndim - 1) if mode == "row" else (1,) * data.ndim
    keep = get_rng(xp).random(size) < 1.0 - p
    noise = keep.astype(data.dtype)
    if p < 1.0:
        noise /= data.dtype.type(1.0 - p)
    return input * noise


class StochasticDepth(Module):
    """``stochastic_depth`` with the module's own training flag (``eval()`` disables it)."""

    def __init__(self, p, mode):
        super().__init__()
        self.p = check_number("StochasticDepth", "p", p, 0.0, 1.0)
        self.mode = check_choice("StochasticDepth", "mode", mode, ("batch", "row"))

    def forward(self, input):
        return stochastic_depth(input, self.p, self.mode, self.training)

    def extra_repr(self):
        return f"p={self.p}, mode={self.mode}"


class Permute(Module):
    """Reorder the axes: ``Permute([0, 2, 3, 1])`` turns NCHW into NHWC."""

    def __init__(self, dims):
        super().__init__()
        check_type("Permute", "dims", dims, (list, tuple), "a list of axes")
        if sorted(dims) != list(range(len(dims))):
            raise ValueError(f"Permute: dims must be a permutation of 0..{len(dims) - 1}, "
                             f"got {list(dims)}")
        self.dims = list(dims)

    def forward(self, x):
        if x.ndim != len(self.dims):
            raise ValueError(f"Permute: input must be {len(self.dims)}-D for dims "
                             f"{self.dims}, got shape {x.shape}")
        return F.transpose(x, self.dims)

    def extra_repr(self):
        return f"dims={self.dims}"


class LayerNorm2d(LayerNorm):
    """``LayerNorm`` over the channels of an (N, C, H, W) map, at every position (the
    map is moved to NHWC, normalised over C and moved back), as ConvNeXt's."""

    def forward(self, input):
        if input.ndim != 4:
            raise ValueError(f"LayerNorm2d: input must be (N, C, H, W), got shape "
                             f"{input.shape}")
        x = F.transpose(input, (0, 2, 3, 1))
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return F.transpose(x, (0, 3, 1, 2))


def _same_padding(kernel_size, dilation):
    """torchvision's default padding: (k - 1) // 2 * d per dim (keeps the size at stride 1)."""
    k = ntuple("Conv2dNormActivation", "kernel_size", kernel_size, 2, low=1)
    d = ntuple("Conv2dNormActivation", "dilation", dilation, 2, low=1)
    pad = tuple((ki - 1) // 2 * di for ki, di in zip(k, d))
    both_ints = isinstance(kernel_size, int) and isinstance(dilation, int)
    return pad[0] if both_ints else pad


class Conv2dNormActivation(Sequential):
    """A ``Conv2d``, then ``norm_layer(out_channels)`` and ``activation_layer()`` when
    they are not None, as ``torchvision.ops.Conv2dNormActivation``: the padding defaults
    to "same" ((k - 1) // 2 * dilation) and the convolution has a bias only when there is
    no norm layer (``bias`` overrides).  Keys: ``0.weight``, ``1.running_mean``, ..."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None,
                 groups=1, norm_layer=BatchNorm2d, activation_layer=ReLU, dilation=1,
                 inplace=True, bias=None):
        name = "Conv2dNormActivation"
        check_callable(name, "norm_layer", norm_layer, allow_none=True)
        check_callable(name, "activation_layer", activation_layer, allow_none=True)
        if padding is None:
            padding = _same_padding(kernel_size, dilation)
        if bias is None:
            bias = norm_layer is None
        layers = [Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                         dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer(**({} if inplace is None else
                                               {"inplace": inplace})))
        super().__init__(*layers)
        self.out_channels = out_channels


class SqueezeExcitation(Module):
    """Squeeze-and-excitation (Hu et al., 2018): average each channel over the map,
    pass the (N, C, 1, 1) result through ``fc1`` (C -> squeeze_channels), ``activation``,
    ``fc2`` (back to C) and ``scale_activation``, and scale the input's channels by it,
    as ``torchvision.ops.SqueezeExcitation``."""

    def __init__(self, input_channels, squeeze_channels, activation=ReLU,
                 scale_activation=Sigmoid):
        super().__init__()
        check_int("SqueezeExcitation", "input_channels", input_channels, low=1)
        check_int("SqueezeExcitation", "squeeze_channels", squeeze_channels, low=1)
        self.avgpool = AdaptiveAvgPool2d(1)
        self.fc1 = Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, input):
        scale = self.avgpool(input)
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(scale))))
        return input * scale
