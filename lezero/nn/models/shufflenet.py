"""ShuffleNet V2 (Ma et al., 2018) as torchvision builds it: x0_5, x1_0, x1_5, x2_0.

``conv1`` (3x3 stride-2 convolution, BN, ReLU), ``maxpool``, ``stage2`` .. ``stage4``
(Sequentials of ``InvertedResidual`` units with ``branch1``/``branch2``), ``conv5`` and
``fc``: torchvision's keys.  A unit of stride 1 splits its channels in two, transforms
one half and concatenates; a unit of stride 2 transforms the whole input twice
(``branch1`` and ``branch2``) and so doubles the channels; both end in a channel shuffle
of two groups.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models._weights import check_weights
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int

__all__ = ["ShuffleNetV2", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
           "shufflenet_v2_x2_0"]


def _depthwise(channels, stride):
    return nn.Conv2d(channels, channels, 3, stride, 1, bias=False, groups=channels)


def _pointwise(inp, oup, relu=True):
    layers = [nn.Conv2d(inp, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)]
    return layers + [nn.ReLU(inplace=True)] if relu else layers


class InvertedResidual(nn.Module):
    """One ShuffleNet V2 unit from ``inp`` to ``oup`` channels (``stride`` 1 to 3)."""

    def __init__(self, inp, oup, stride):
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError(f"InvertedResidual: stride must be 1, 2 or 3, got {stride}")
        self.stride = stride
        branch = oup // 2
        if stride == 1 and inp != branch * 2:
            raise ValueError(f"InvertedResidual: with stride 1, inp ({inp}) must equal "
                             f"oup // 2 * 2 ({branch * 2})")
        if stride > 1:
            self.branch1 = nn.Sequential(_depthwise(inp, stride), nn.BatchNorm2d(inp),
                                         *_pointwise(inp, branch))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            *_pointwise(inp if stride > 1 else branch, branch),
            _depthwise(branch, stride), nn.BatchNorm2d(branch), *_pointwise(branch, branch))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = F.chunk(x, 2, axis=1)
            out = F.concatenate([x1, self.branch2(x2)], axis=1)
        else:
            out = F.concatenate([self.branch1(x), self.branch2(x)], axis=1)
        return F.channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNet V2 with ``stages_repeats`` (3 ints: units in stage2..stage4) and
    ``stages_out_channels`` (5 ints: conv1, the three stages, conv5)."""

    def __init__(self, stages_repeats, stages_out_channels, num_classes=1000,
                 inverted_residual=InvertedResidual):
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError(f"ShuffleNetV2: stages_repeats must list 3 positive ints, got "
                             f"{stages_repeats!r}")
        if len(stages_out_channels) != 5:
            raise ValueError(f"ShuffleNetV2: stages_out_channels must list 5 positive ints, "
                             f"got {stages_out_channels!r}")
        check_int("ShuffleNetV2", "num_classes", num_classes, low=1)
        self._stage_out_channels = list(stages_out_channels)
        channels = stages_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(3, channels, 3, 2, 1, bias=False),
                                   nn.BatchNorm2d(channels), nn.ReLU(inplace=True))
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for i, (repeats, out) in enumerate(zip(stages_repeats, stages_out_channels[1:4])):
            units = [inverted_residual(channels, out, 2)]
            units += [inverted_residual(out, out, 1) for _ in range(repeats - 1)]
            setattr(self, f"stage{i + 2}", nn.Sequential(*units))
            channels = out
        out = stages_out_channels[-1]
        self.conv5 = nn.Sequential(*_pointwise(channels, out))
        self.fc = nn.Linear(out, num_classes)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean(axis=(2, 3)))


def _shufflenet(name, channels, weights, progress, kwargs):
    check_weights(name, weights, progress)
    return ShuffleNetV2([4, 8, 4], channels, **kwargs)


@register_model()
def shufflenet_v2_x0_5(*, weights=None, progress=True, **kwargs):
    """ShuffleNet V2 at 0.5x width; ``kwargs`` (``num_classes``) go to ``ShuffleNetV2``."""
    return _shufflenet("shufflenet_v2_x0_5", [24, 48, 96, 192, 1024], weights, progress, kwargs)


@register_model()
def shufflenet_v2_x1_0(*, weights=None, progress=True, **kwargs):
    """ShuffleNet V2 at 1.0x width."""
    return _shufflenet("shufflenet_v2_x1_0", [24, 116, 232, 464, 1024], weights, progress,
                       kwargs)


@register_model()
def shufflenet_v2_x1_5(*, weights=None, progress=True, **kwargs):
    """ShuffleNet V2 at 1.5x width."""
    return _shufflenet("shufflenet_v2_x1_5", [24, 176, 352, 704, 1024], weights, progress,
                       kwargs)


@register_model()
def shufflenet_v2_x2_0(*, weights=None, progress=True, **kwargs):
    """ShuffleNet V2 at 2.0x width."""
    return _shufflenet("shufflenet_v2_x2_0", [24, 244, 488, 976, 2048], weights, progress,
                       kwargs)
