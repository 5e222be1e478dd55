"""MobileNetV3 Large and Small (Howard et al., 2019) as torchvision builds them.

``features.0`` is the stem (3x3 stride-2 conv, BN, Hardswish), ``features.1`` ..
``features.N`` the inverted residual blocks (each a ``block`` Sequential of
``Conv2dNormActivation``s and, where the paper's table says so, a ``SqueezeExcitation``
with a hard-sigmoid gate), the last feature a 1x1 convolution to 6x the last block's
width; ``classifier`` is Linear, Hardswish, Dropout, Linear.  Batch norms use eps 1e-3
and momentum 0.01.  Keys are torchvision's.
"""
import functools

import lezero.functions as F
from lezero import nn
from lezero.nn.layers.vision import Conv2dNormActivation, SqueezeExcitation
from lezero.nn.models._init import init_cnn_
from lezero.nn.models._weights import check_weights
from lezero.nn.models.mobilenet import make_divisible
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["InvertedResidualConfig", "MobileNetV3", "mobilenet_v3_large",
           "mobilenet_v3_small"]


class InvertedResidualConfig:
    """One row of the paper's Tables 1 and 2, with widths scaled by ``width_mult``:
    input, kernel, expanded and output channels, squeeze-excitation, activation ("RE"
    ReLU or "HS" Hardswish), stride and dilation."""

    def __init__(self, input_channels, kernel, expanded_channels, out_channels, use_se,
                 activation, stride, dilation, width_mult):
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels, width_mult):
        return make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise k x k, optional squeeze-excitation, project (1x1, linear);
    the input is added back when stride is 1 and the width is unchanged."""

    def __init__(self, cnf, norm_layer, se_layer=None):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"InvertedResidual: stride must be 1 or 2, got {cnf.stride}")
        se_layer = se_layer or functools.partial(SqueezeExcitation,
                                                 scale_activation=nn.Hardsigmoid)
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        act = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels, 1,
                                               norm_layer=norm_layer, activation_layer=act))
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(Conv2dNormActivation(
            cnf.expanded_channels, cnf.expanded_channels, cnf.kernel, stride,
            dilation=cnf.dilation, groups=cnf.expanded_channels, norm_layer=norm_layer,
            activation_layer=act))
        if cnf.use_se:
            layers.append(se_layer(cnf.expanded_channels,
                                   make_divisible(cnf.expanded_channels // 4, 8)))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels, 1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, x):
        out = self.block(x)
        return out + x if self.use_res_connect else out


class MobileNetV3(nn.Module):
    """MobileNetV3 from a list of ``InvertedResidualConfig`` and the classifier's hidden
    width ``last_channel``.  Extra keyword arguments (the builders' ``width_mult``,
    ``reduced_tail``, ``dilated``) are accepted and ignored, as torchvision does."""

    def __init__(self, inverted_residual_setting, last_channel, num_classes=1000, block=None,
                 norm_layer=None, dropout=0.2, **kwargs):
        super().__init__()
        name = "MobileNetV3"
        if not inverted_residual_setting:
            raise ValueError(f"{name}: inverted_residual_setting must not be empty")
        for cnf in inverted_residual_setting:
            check_type(name, "inverted_residual_setting entries", cnf, InvertedResidualConfig)
        check_int(name, "num_classes", num_classes, low=1)
        check_number(name, "dropout", dropout, 0.0, 1.0)
        block = block or InvertedResidual
        norm_layer = norm_layer or functools.partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        first = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, first, 3, 2, norm_layer=norm_layer,
                                       activation_layer=nn.Hardswish)]
        layers += [block(cnf, norm_layer) for cnf in inverted_residual_setting]
        last_in = inverted_residual_setting[-1].out_channels
        layers.append(Conv2dNormActivation(last_in, 6 * last_in, 1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(6 * last_in, last_channel), nn.Hardswish(inplace=True),
            nn.Dropout(p=dropout, inplace=True), nn.Linear(last_channel, num_classes))
        init_cnn_(self, linear_std=0.01)     # torchvision's choices for MobileNetV3

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(F.flatten(x, 1))


# kernel, expanded, out, SE, activation, stride (input widths chain from the row above)
_LARGE = [(3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2),
          (3, 72, 24, False, "RE", 1), (5, 72, 40, True, "RE", 2),
          (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
          (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1),
          (3, 184, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
          (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1)]
_LARGE_TAIL = [(5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1),
               (5, 960, 160, True, "HS", 1)]
_SMALL = [(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2),
          (3, 88, 24, False, "RE", 1), (5, 96, 40, True, "HS", 2),
          (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
          (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1)]
_SMALL_TAIL = [(5, 288, 96, True, "HS", 2), (5, 576, 96, True, "HS", 1),
               (5, 576, 96, True, "HS", 1)]


def _mobilenet_v3_conf(arch, width_mult=1.0, reduced_tail=False, dilated=False, **kwargs):
    """The block configurations and ``last_channel`` of ``arch``; ``reduced_tail`` halves
    the last stage's widths, ``dilated`` dilates it by 2 instead of striding."""
    divider = 2 if reduced_tail else 1
    body, tail, last = ((_LARGE, _LARGE_TAIL, 1280) if arch == "mobilenet_v3_large"
                        else (_SMALL, _SMALL_TAIL, 1024))
    tail = [(k, e if i == 0 else e // divider, o // divider, se, a, s)
            for i, (k, e, o, se, a, s) in enumerate(tail)]
    setting, channels = [], 16
    for i, (k, e, o, se, a, s) in enumerate(body + tail):
        dilation = 2 if dilated and i >= len(body) else 1
        setting.append(InvertedResidualConfig(channels, k, e, o, se, a, s, dilation,
                                              width_mult))
        channels = o
    return setting, InvertedResidualConfig.adjust_channels(last // divider, width_mult)


@register_model()
def mobilenet_v3_large(*, weights=None, progress=True, **kwargs):
    """MobileNetV3-Large; ``kwargs``: ``width_mult``, ``reduced_tail``, ``dilated`` and
    ``MobileNetV3``'s (``num_classes``, ``dropout``, ``norm_layer``)."""
    check_weights("mobilenet_v3_large", weights, progress)
    setting, last = _mobilenet_v3_conf("mobilenet_v3_large", **kwargs)
    return MobileNetV3(setting, last, **kwargs)


@register_model()
def mobilenet_v3_small(*, weights=None, progress=True, **kwargs):
    """MobileNetV3-Small; the same keyword arguments as ``mobilenet_v3_large``."""
    check_weights("mobilenet_v3_small", weights, progress)
    setting, last = _mobilenet_v3_conf("mobilenet_v3_small", **kwargs)
    return MobileNetV3(setting, last, **kwargs)
