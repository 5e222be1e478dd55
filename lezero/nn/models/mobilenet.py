"""MobileNetV2 (Sandler et al., 2018) with torchvision's layout, names and initialisation.

``features.0`` is the stem (conv, norm, ReLU6), ``features.1`` .. ``features.17`` the
inverted residual blocks (each a ``conv`` Sequential), ``features.18`` the final 1x1
convolution; ``classifier`` is dropout and a linear layer.  Keys such as
``features.2.conv.1.0.weight`` are torchvision's, so its checkpoints load as they are.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.inference_fusion import sequential
from lezero.nn.layers.vision import Conv2dNormActivation
from lezero.nn.models._weights import check_weights
from lezero.nn.models._init import init_cnn_

# expansion t, output channels c, repeats n, first stride s (the paper's Table 2)
INVERTED_RESIDUAL_SETTING = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                             [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]


def make_divisible(v, divisor=8, min_value=None):
    """Round a channel count to a multiple of ``divisor``, never below 90% of ``v``."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _conv_bn_relu6(in_channels, out_channels, kernel_size=3, stride=1, groups=1,
                   norm_layer=None):
    """torchvision's ``Conv2dNormActivation`` as MobileNetV2 uses it: ReLU6 (keys ``0``,
    ``1``)."""
    return Conv2dNormActivation(in_channels, out_channels, kernel_size, stride, groups=groups,
                                norm_layer=norm_layer or nn.BatchNorm2d,
                                activation_layer=nn.ReLU6)


class InvertedResidual(nn.Module):
    """Expand with a 1x1 convolution, filter depthwise 3x3, project back linearly; the
    input is added back when the shape is unchanged."""

    def __init__(self, inp, oup, stride, expand_ratio, norm_layer=None):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"InvertedResidual: stride must be 1 or 2, got {stride}")
        norm_layer = norm_layer or nn.BatchNorm2d
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(_conv_bn_relu6(inp, hidden, kernel_size=1, norm_layer=norm_layer))
        layers += [_conv_bn_relu6(hidden, hidden, stride=stride, groups=hidden,
                                  norm_layer=norm_layer),
                   nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
                   norm_layer(oup)]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x):
        out = sequential(self.conv, x)
        return x + out if self.use_res_connect else out


class MobileNetV2(nn.Module):
    """MobileNetV2: ``width_mult`` scales every width (rounded to ``round_nearest``);
    ``small_input=True`` makes the stem stride 1, for 32x32 images (same keys)."""

    def __init__(self, num_classes=1000, width_mult=1.0, inverted_residual_setting=None,
                 round_nearest=8, norm_layer=None, dropout=0.2, in_channels=3,
                 small_input=False):
        super().__init__()
        setting = inverted_residual_setting or INVERTED_RESIDUAL_SETTING
        if any(len(row) != 4 for row in setting):
            raise ValueError("MobileNetV2: inverted_residual_setting rows must be [t, c, n, s]")
        norm_layer = norm_layer or nn.BatchNorm2d
        channels = make_divisible(32 * width_mult, round_nearest)
        self.last_channel = make_divisible(1280 * max(1.0, width_mult), round_nearest)
        features = [_conv_bn_relu6(in_channels, channels, stride=1 if small_input else 2,
                                   norm_layer=norm_layer)]
        for t, c, n, s in setting:
            out = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(InvertedResidual(channels, out, s if i == 0 else 1, t,
                                                 norm_layer))
                channels = out
        features.append(_conv_bn_relu6(channels, self.last_channel, kernel_size=1,
                                       norm_layer=norm_layer))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Linear(self.last_channel, num_classes))
        init_cnn_(self, linear_std=0.01)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(sequential(self.features, x), (1, 1))
        return self.classifier(F.flatten(x, 1))


def mobilenet_v2(*, weights=None, progress=True, **kwargs):
    """MobileNetV2; keyword arguments go to ``MobileNetV2``."""
    check_weights("mobilenet_v2", weights, progress)
    return MobileNetV2(**kwargs)
