"""EfficientNet B0-B7 (Tan and Le, 2019) and EfficientNetV2 S/M/L (2021), as torchvision
builds them.

``features.0`` is the stem (3x3 stride-2 conv, BN, SiLU), ``features.1`` ..
``features.K`` one Sequential per stage of ``MBConv`` blocks (V2's first stages:
``FusedMBConv``), each holding a ``block`` Sequential and a ``stochastic_depth``; the last
feature a 1x1 convolution (4x the last stage's width for B0-B7, 1280 for V2);
``classifier`` is Dropout and Linear.  The stochastic depth probability grows linearly
with the block index up to ``stochastic_depth_prob``.  Keys are torchvision's.
"""
import copy
import functools
import math

import lezero.functions as F
from lezero import nn
from lezero.nn.layers.vision import Conv2dNormActivation, SqueezeExcitation, StochasticDepth
from lezero.nn.models._init import init_cnn_
from lezero.nn.models._weights import check_weights
from lezero.nn.models.mobilenet import make_divisible
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["MBConvConfig", "FusedMBConvConfig", "MBConv", "FusedMBConv", "EfficientNet"] + \
    [f"efficientnet_b{i}" for i in range(8)] + \
    ["efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"]


class _MBConvConfig:
    """One stage: expansion ratio, kernel, first stride, input and output channels,
    number of blocks, and the block class."""

    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels,
                 num_layers, block):
        self.expand_ratio, self.kernel, self.stride = expand_ratio, kernel, stride
        self.input_channels, self.out_channels = input_channels, out_channels
        self.num_layers, self.block = num_layers, block

    @staticmethod
    def adjust_channels(channels, width_mult, min_value=None):
        return make_divisible(channels * width_mult, 8, min_value)


class MBConvConfig(_MBConvConfig):
    """A stage of ``MBConv`` blocks, widths scaled by ``width_mult`` and the number of
    blocks by ``depth_mult`` (rounded up)."""

    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 width_mult=1.0, depth_mult=1.0, block=None):
        super().__init__(expand_ratio, kernel, stride,
                         self.adjust_channels(input_channels, width_mult),
                         self.adjust_channels(out_channels, width_mult),
                         int(math.ceil(num_layers * depth_mult)), block or MBConv)


class FusedMBConvConfig(_MBConvConfig):
    """A stage of ``FusedMBConv`` blocks (EfficientNetV2)."""

    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 block=None):
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels,
                         num_layers, block or FusedMBConv)


class _Residual(nn.Module):
    """``block`` plus the input (through stochastic depth) when the shape is kept."""

    def _finish(self, cnf, layers, stochastic_depth_prob):
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"{type(self).__name__}: stride must be 1 or 2, got {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, x):
        out = self.block(x)
        return self.stochastic_depth(out) + x if self.use_res_connect else out


class MBConv(_Residual):
    """Expand (1x1), depthwise k x k, squeeze-excitation (SiLU, a quarter of the input
    width), project (1x1, linear)."""

    def __init__(self, cnf, stochastic_depth_prob, norm_layer, se_layer=SqueezeExcitation):
        super().__init__()
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        layers = []
        if expanded != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded, 1,
                                               norm_layer=norm_layer, activation_layer=nn.SiLU))
        layers += [
            Conv2dNormActivation(expanded, expanded, cnf.kernel, cnf.stride, groups=expanded,
                                 norm_layer=norm_layer, activation_layer=nn.SiLU),
            se_layer(expanded, max(1, cnf.input_channels // 4),
                     activation=functools.partial(nn.SiLU, inplace=True)),
            Conv2dNormActivation(expanded, cnf.out_channels, 1, norm_layer=norm_layer,
                                 activation_layer=None)]
        self._finish(cnf, layers, stochastic_depth_prob)


class FusedMBConv(_Residual):
    """One k x k convolution in place of expand + depthwise, then a 1x1 projection."""

    def __init__(self, cnf, stochastic_depth_prob, norm_layer):
        super().__init__()
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers = [Conv2dNormActivation(cnf.input_channels, expanded, cnf.kernel, cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU),
                      Conv2dNormActivation(expanded, cnf.out_channels, 1, norm_layer=norm_layer,
                                           activation_layer=None)]
        else:
            layers = [Conv2dNormActivation(cnf.input_channels, cnf.out_channels, cnf.kernel,
                                           cnf.stride, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU)]
        self._finish(cnf, layers, stochastic_depth_prob)


class EfficientNet(nn.Module):
    """EfficientNet from a list of stage configurations (``MBConvConfig`` /
    ``FusedMBConvConfig``), the classifier's ``dropout`` and the largest
    ``stochastic_depth_prob``; ``last_channel`` fixes the final 1x1 convolution's width."""

    def __init__(self, inverted_residual_setting, dropout, stochastic_depth_prob=0.2,
                 num_classes=1000, norm_layer=None, last_channel=None):
        super().__init__()
        name = "EfficientNet"
        if not inverted_residual_setting:
            raise ValueError(f"{name}: inverted_residual_setting must not be empty")
        for cnf in inverted_residual_setting:
            check_type(name, "inverted_residual_setting entries", cnf, _MBConvConfig,
                       "MBConvConfig or FusedMBConvConfig")
        check_number(name, "dropout", dropout, 0.0, 1.0)
        check_number(name, "stochastic_depth_prob", stochastic_depth_prob, 0.0, 1.0)
        check_int(name, "num_classes", num_classes, low=1)
        norm_layer = norm_layer or nn.BatchNorm2d
        layers = [Conv2dNormActivation(3, inverted_residual_setting[0].input_channels, 3, 2,
                                       norm_layer=norm_layer, activation_layer=nn.SiLU)]
        layers += _stages(inverted_residual_setting, stochastic_depth_prob, norm_layer)
        last_in = inverted_residual_setting[-1].out_channels
        last_out = last_channel if last_channel is not None else 4 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, 1, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(last_out, num_classes))
        _init_efficientnet(self)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(F.flatten(x, 1))


def _stages(setting, stochastic_depth_prob, norm_layer):
    """One Sequential per stage; block i of the network gets stochastic depth
    ``stochastic_depth_prob * i / total``."""
    total = sum(cnf.num_layers for cnf in setting)
    stages, index = [], 0
    for cnf in setting:
        blocks = []
        for _ in range(cnf.num_layers):
            block_cnf = copy.copy(cnf)
            if blocks:                  # later blocks of a stage keep width and size
                block_cnf.input_channels, block_cnf.stride = block_cnf.out_channels, 1
            blocks.append(block_cnf.block(block_cnf, stochastic_depth_prob * index / total,
                                          norm_layer))
            index += 1
        stages.append(nn.Sequential(*blocks))
    return stages


def _init_efficientnet(model):
    """torchvision's: Kaiming-normal (fan-out) convolutions, BN 1/0, linear weights
    U(-1/sqrt(out), 1/sqrt(out)), zero biases."""
    init_cnn_(model)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.out_features)
            nn.init.uniform_(m.weight, -bound, bound)
            nn.init.zeros_(m.bias)


# expand ratio, kernel, stride, input channels, output channels, blocks
_B_STAGES = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
             (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
             (6, 3, 1, 192, 320, 1)]
# width, depth, dropout, BN (eps, momentum) of B0..B7
_B_SCALES = [(1.0, 1.0, 0.2, None), (1.0, 1.1, 0.2, None), (1.1, 1.2, 0.3, None),
             (1.2, 1.4, 0.3, None), (1.4, 1.8, 0.4, None), (1.6, 2.2, 0.4, (1e-3, 0.01)),
             (1.8, 2.6, 0.5, (1e-3, 0.01)), (2.0, 3.1, 0.5, (1e-3, 0.01))]
# stages of V2 S/M/L: (fused?, expand, kernel, stride, in, out, blocks); dropout
_V2 = {
    "s": ([(1, 1, 3, 1, 24, 24, 2), (1, 4, 3, 2, 24, 48, 4), (1, 4, 3, 2, 48, 64, 4),
           (0, 4, 3, 2, 64, 128, 6), (0, 6, 3, 1, 128, 160, 9), (0, 6, 3, 2, 160, 256, 15)],
          0.2),
    "m": ([(1, 1, 3, 1, 24, 24, 3), (1, 4, 3, 2, 24, 48, 5), (1, 4, 3, 2, 48, 80, 5),
           (0, 4, 3, 2, 80, 160, 7), (0, 6, 3, 1, 160, 176, 14), (0, 6, 3, 2, 176, 304, 18),
           (0, 6, 3, 1, 304, 512, 5)], 0.3),
    "l": ([(1, 1, 3, 1, 32, 32, 4), (1, 4, 3, 2, 32, 64, 7), (1, 4, 3, 2, 64, 96, 7),
           (0, 4, 3, 2, 96, 192, 10), (0, 6, 3, 1, 192, 224, 19), (0, 6, 3, 2, 224, 384, 25),
           (0, 6, 3, 1, 384, 640, 7)], 0.4),
}


def _efficientnet_b(i, weights, progress, kwargs):
    name = f"efficientnet_b{i}"
    check_weights(name, weights, progress)
    width, depth, dropout, bn = _B_SCALES[i]
    setting = [MBConvConfig(*row, width_mult=width, depth_mult=depth) for row in _B_STAGES]
    if bn is not None:
        kwargs.setdefault("norm_layer", functools.partial(nn.BatchNorm2d, eps=bn[0],
                                                          momentum=bn[1]))
    return EfficientNet(setting, kwargs.pop("dropout", dropout), **kwargs)


def _efficientnet_v2(size, weights, progress, kwargs):
    check_weights(f"efficientnet_v2_{size}", weights, progress)
    rows, dropout = _V2[size]
    setting = [(FusedMBConvConfig if fused else MBConvConfig)(*row) for fused, *row in rows]
    kwargs.setdefault("norm_layer", functools.partial(nn.BatchNorm2d, eps=1e-3))
    return EfficientNet(setting, kwargs.pop("dropout", dropout), last_channel=1280, **kwargs)


def _register_b(i):
    def builder(*, weights=None, progress=True, **kwargs):
        return _efficientnet_b(i, weights, progress, kwargs)
    builder.__name__ = builder.__qualname__ = f"efficientnet_b{i}"
    width, depth, dropout, _ = _B_SCALES[i]
    builder.__doc__ = (f"EfficientNet-B{i} (width x{width}, depth x{depth}, dropout "
                       f"{dropout}); ``kwargs`` go to ``EfficientNet``.")
    return register_model()(builder)


def _register_v2(size):
    def builder(*, weights=None, progress=True, **kwargs):
        return _efficientnet_v2(size, weights, progress, kwargs)
    builder.__name__ = builder.__qualname__ = f"efficientnet_v2_{size}"
    builder.__doc__ = f"EfficientNetV2-{size.upper()}; ``kwargs`` go to ``EfficientNet``."
    return register_model()(builder)


efficientnet_b0, efficientnet_b1, efficientnet_b2, efficientnet_b3, efficientnet_b4, \
    efficientnet_b5, efficientnet_b6, efficientnet_b7 = (_register_b(i) for i in range(8))
efficientnet_v2_s, efficientnet_v2_m, efficientnet_v2_l = (_register_v2(s) for s in "sml")
