"""SqueezeNet 1.0 and 1.1 (Iandola et al., 2016) as torchvision builds them.

``features`` holds the stem convolution, ceil-mode max pools and ``Fire`` modules
(``squeeze``, ``expand1x1``, ``expand3x3``); ``classifier`` is dropout, a 1x1
convolution to the classes (``classifier.1``), ReLU and global average pooling.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models._weights import check_weights
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_choice, check_int, check_number

__all__ = ["Fire", "SqueezeNet", "squeezenet1_0", "squeezenet1_1"]


class Fire(nn.Module):
    """Squeeze to ``squeeze_planes`` with a 1x1 convolution, then expand with 1x1 and 3x3
    convolutions side by side; the two expansions are concatenated on the channels."""

    def __init__(self, inplanes, squeeze_planes, expand1x1_planes, expand3x3_planes):
        super().__init__()
        self.inplanes = inplanes
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return F.concatenate([self.expand1x1_activation(self.expand1x1(x)),
                              self.expand3x3_activation(self.expand3x3(x))], axis=1)


def _pool():
    return nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)


def _features(version):
    if version == "1_0":
        return [nn.Conv2d(3, 96, kernel_size=7, stride=2), nn.ReLU(inplace=True), _pool(),
                Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128), _pool(),
                Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256), _pool(), Fire(512, 64, 256, 256)]
    return [nn.Conv2d(3, 64, kernel_size=3, stride=2), nn.ReLU(inplace=True), _pool(),
            Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), _pool(),
            Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), _pool(),
            Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256)]


class SqueezeNet(nn.Module):
    """SqueezeNet ``version`` "1_0" or "1_1" (2.4x less computation, same accuracy).

    Initialisation is torchvision's: Kaiming-uniform convolutions, N(0, 0.01) for the
    final one, zero biases."""

    def __init__(self, version="1_0", num_classes=1000, dropout=0.5):
        super().__init__()
        check_choice("SqueezeNet", "version", version, ("1_0", "1_1"))
        check_int("SqueezeNet", "num_classes", num_classes, low=1)
        check_number("SqueezeNet", "dropout", dropout, 0.0, 1.0)
        self.num_classes = num_classes
        self.features = nn.Sequential(*_features(version))
        final_conv = nn.Conv2d(512, num_classes, kernel_size=1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), final_conv,
                                        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    nn.init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return F.flatten(self.classifier(self.features(x)), 1)


@register_model()
def squeezenet1_0(*, weights=None, progress=True, **kwargs):
    """SqueezeNet 1.0; ``kwargs`` (``num_classes``, ``dropout``) go to ``SqueezeNet``."""
    check_weights("squeezenet1_0", weights, progress)
    return SqueezeNet("1_0", **kwargs)


@register_model()
def squeezenet1_1(*, weights=None, progress=True, **kwargs):
    """SqueezeNet 1.1; ``kwargs`` (``num_classes``, ``dropout``) go to ``SqueezeNet``."""
    check_weights("squeezenet1_1", weights, progress)
    return SqueezeNet("1_1", **kwargs)
