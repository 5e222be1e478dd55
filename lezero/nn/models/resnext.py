"""The deeper and wider members of torchvision's ResNet family: ResNet-101/152,
ResNeXt (grouped 3x3 convolutions; Xie et al., 2017) and wide ResNets (Zagoruyko and
Komodakis, 2016), all ``ResNet`` with torchvision's ``groups`` and ``width_per_group``.

A Bottleneck's 3x3 convolution is ``int(planes * width_per_group / 64) * groups``
channels wide: ``resnext50_32x4d`` is 32 groups of 4 (128 channels in layer1, against
ResNet-50's 64), ``wide_resnet50_2`` doubles the width (128).  Keys are ResNet's.
"""
from lezero.nn.models._weights import check_weights
from lezero.nn.models.registry import register_model
from lezero.nn.models.resnet import Bottleneck, ResNet

__all__ = ["resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
           "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"]


def _resnet(name, layers, weights, progress, kwargs, groups=None, width=None):
    """A Bottleneck ResNet; ``groups``/``width`` are fixed by the variant (another value
    is an error, as in torchvision)."""
    check_weights(name, weights, progress)
    for arg, value in (("groups", groups), ("width_per_group", width)):
        if value is not None:
            if kwargs.get(arg, value) != value:
                raise ValueError(f"{name}: {arg} is {value} in this variant, got "
                                 f"{kwargs[arg]!r}; build ResNet(Bottleneck, {layers}, "
                                 f"{arg}=...) for another")
            kwargs[arg] = value
    return ResNet(Bottleneck, layers, **kwargs)


@register_model()
def resnet101(*, weights=None, progress=True, **kwargs):
    """ResNet-101: Bottlenecks [3, 4, 23, 3]."""
    return _resnet("resnet101", [3, 4, 23, 3], weights, progress, kwargs)


@register_model()
def resnet152(*, weights=None, progress=True, **kwargs):
    """ResNet-152: Bottlenecks [3, 8, 36, 3]."""
    return _resnet("resnet152", [3, 8, 36, 3], weights, progress, kwargs)


@register_model()
def resnext50_32x4d(*, weights=None, progress=True, **kwargs):
    """ResNeXt-50 32x4d: ResNet-50's layout with 32 groups of width 4."""
    return _resnet("resnext50_32x4d", [3, 4, 6, 3], weights, progress, kwargs, 32, 4)


@register_model()
def resnext101_32x8d(*, weights=None, progress=True, **kwargs):
    """ResNeXt-101 32x8d."""
    return _resnet("resnext101_32x8d", [3, 4, 23, 3], weights, progress, kwargs, 32, 8)


@register_model()
def resnext101_64x4d(*, weights=None, progress=True, **kwargs):
    """ResNeXt-101 64x4d."""
    return _resnet("resnext101_64x4d", [3, 4, 23, 3], weights, progress, kwargs, 64, 4)


@register_model()
def wide_resnet50_2(*, weights=None, progress=True, **kwargs):
    """Wide ResNet-50-2: ResNet-50 with bottlenecks twice as wide (width_per_group 128)."""
    return _resnet("wide_resnet50_2", [3, 4, 6, 3], weights, progress, kwargs, None, 128)


@register_model()
def wide_resnet101_2(*, weights=None, progress=True, **kwargs):
    """Wide ResNet-101-2."""
    return _resnet("wide_resnet101_2", [3, 4, 23, 3], weights, progress, kwargs, None, 128)
