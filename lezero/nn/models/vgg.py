"""VGG (Simonyan and Zisserman, 2014) with torchvision's layout, names and initialisation.

``features`` is one ``Sequential`` built from a configuration row of ``CFGS`` (numbers are
3x3 convolution widths, "M" a 2x2 max pool); ``avgpool`` and ``classifier`` follow.  The
``state_dict`` keys (``features.0.weight``, ``classifier.6.bias``, ...) are torchvision's,
so its checkpoints load with ``strict=True``.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models._weights import check_weights
from lezero.nn.models._init import init_cnn_

# The configurations of the paper's Table 1: A = VGG-11, B = VGG-13, D = VGG-16, E = VGG-19.
CFGS = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512,
          "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512,
          512, 512, 512, "M"],
}


def make_layers(cfg, batch_norm=False, in_channels=3, width_mult=1.0):
    """The ``features`` Sequential for one configuration row (``width_mult`` scales every
    convolution's width: 0.25 gives a VGG small enough for tests and CPU runs)."""
    layers = []
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        width = max(1, int(v * width_mult))
        layers.append(nn.Conv2d(in_channels, width, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(width))
        layers.append(nn.ReLU(inplace=True))
        in_channels = width
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """VGG from a ``features`` Sequential: adaptive average pooling, then three linear
    layers with ReLU and dropout.

    ``small_input=True`` is the CIFAR-style head: pool to 1x1 and use ``hidden``-wide
    linear layers (default 512) instead of 7x7 and 4096, for 32x32 images.  Its linear
    layers keep PyTorch's default initialisation: torchvision's N(0, 0.01) is tuned for
    4096-wide layers and makes a narrow head's signal vanish (three layers at width 64
    scale it by 0.08 each).
    """

    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5,
                 small_input=False, hidden=None):
        super().__init__()
        channels = _out_channels(features)
        pool = 1 if small_input else 7
        hidden = hidden or (512 if small_input else 4096)
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((pool, pool))
        self.classifier = nn.Sequential(
            nn.Linear(channels * pool * pool, hidden), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(hidden, num_classes))
        if init_weights:
            init_cnn_(self, linear_std=None if small_input else 0.01)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(F.flatten(x, 1))


def _out_channels(features):
    convs = [m for m in features.modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        raise ValueError("VGG: features holds no Conv2d")
    return convs[-1].out_channels


def _vgg(cfg, batch_norm, in_channels=3, width_mult=1.0, *, weights=None, progress=True,
         **kwargs):
    check_weights("vgg", weights, progress)
    return VGG(make_layers(CFGS[cfg], batch_norm, in_channels, width_mult), **kwargs)


def vgg11(**kwargs):
    """VGG-11 (configuration A); keyword arguments go to ``VGG`` and ``make_layers``."""
    return _vgg("A", False, **kwargs)


def vgg11_bn(**kwargs):
    """VGG-11 with batch normalization after every convolution."""
    return _vgg("A", True, **kwargs)


def vgg16(**kwargs):
    """VGG-16 (configuration D)."""
    return _vgg("D", False, **kwargs)


def vgg16_bn(**kwargs):
    """VGG-16 with batch normalization after every convolution."""
    return _vgg("D", True, **kwargs)
