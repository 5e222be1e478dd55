"""ConvNeXt (Liu et al., 2022) tiny/small/base/large, as torchvision builds it.

``features.0`` is the patchify stem (4x4 stride-4 convolution with bias, ``LayerNorm2d``);
then stages of ``CNBlock``s, each stage but the last followed by a downsampling
Sequential (``LayerNorm2d``, 2x2 stride-2 convolution).  A block is a depthwise 7x7
convolution, LayerNorm over channels (in NHWC), Linear to 4x, GELU, Linear back, scaled
per channel by ``layer_scale`` (a (C, 1, 1) parameter) and added to the input through
stochastic depth.  ``classifier`` is LayerNorm2d, Flatten, Linear.  Keys are torchvision's.
"""
import functools

import numpy as np

from lezero import nn
from lezero.core import Parameter
from lezero.nn.layers.vision import (Conv2dNormActivation, LayerNorm2d, Permute,
                                     StochasticDepth)
from lezero.nn.models._weights import check_weights
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["CNBlockConfig", "CNBlock", "ConvNeXt", "convnext_tiny", "convnext_small",
           "convnext_base", "convnext_large"]


class CNBlock(nn.Module):
    """One ConvNeXt block of width ``dim``."""

    def __init__(self, dim, layer_scale, stochastic_depth_prob, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or functools.partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]), norm_layer(dim),
            nn.Linear(dim, 4 * dim, bias=True), nn.GELU(), nn.Linear(4 * dim, dim, bias=True),
            Permute([0, 3, 1, 2]))
        self.layer_scale = Parameter(np.full((dim, 1, 1), layer_scale, dtype=np.float32))
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, x):
        return self.stochastic_depth(self.layer_scale * self.block(x)) + x


class CNBlockConfig:
    """A stage: ``num_layers`` blocks of width ``input_channels``, then downsampling to
    ``out_channels`` (None: the last stage, no downsampling)."""

    def __init__(self, input_channels, out_channels, num_layers):
        self.input_channels = input_channels
        self.out_channels = out_channels
        self.num_layers = num_layers

    def __repr__(self):
        return (f"CNBlockConfig(input_channels={self.input_channels}, "
                f"out_channels={self.out_channels}, num_layers={self.num_layers})")


class ConvNeXt(nn.Module):
    """ConvNeXt from a list of ``CNBlockConfig``; block i of n gets stochastic depth
    ``stochastic_depth_prob * i / (n - 1)``; ``layer_scale`` initialises every block's
    scale.  Extra keyword arguments are accepted and ignored, as torchvision does."""

    def __init__(self, block_setting, stochastic_depth_prob=0.0, layer_scale=1e-6,
                 num_classes=1000, block=None, norm_layer=None, **kwargs):
        super().__init__()
        name = "ConvNeXt"
        if not block_setting:
            raise ValueError(f"{name}: block_setting must not be empty")
        for cnf in block_setting:
            check_type(name, "block_setting entries", cnf, CNBlockConfig)
        check_number(name, "stochastic_depth_prob", stochastic_depth_prob, 0.0, 1.0)
        check_number(name, "layer_scale", layer_scale)
        check_int(name, "num_classes", num_classes, low=1)
        block = block or CNBlock
        norm_layer = norm_layer or functools.partial(LayerNorm2d, eps=1e-6)
        layers = [Conv2dNormActivation(3, block_setting[0].input_channels, kernel_size=4,
                                       stride=4, padding=0, norm_layer=norm_layer,
                                       activation_layer=None, bias=True)]
        total = sum(cnf.num_layers for cnf in block_setting)
        index = 0
        for cnf in block_setting:
            stage = []
            for _ in range(cnf.num_layers):
                sd_prob = stochastic_depth_prob * index / max(total - 1.0, 1.0)
                stage.append(block(cnf.input_channels, layer_scale, sd_prob))
                index += 1
            layers.append(nn.Sequential(*stage))
            if cnf.out_channels is not None:
                layers.append(nn.Sequential(
                    norm_layer(cnf.input_channels),
                    nn.Conv2d(cnf.input_channels, cnf.out_channels, kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last = block_setting[-1]
        width = last.out_channels if last.out_channels is not None else last.input_channels
        self.classifier = nn.Sequential(norm_layer(width), nn.Flatten(1),
                                        nn.Linear(width, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


def _convnext(name, widths, depths, sd_prob, weights, progress, kwargs):
    check_weights(name, weights, progress)
    setting = [CNBlockConfig(w, widths[i + 1] if i + 1 < len(widths) else None, d)
               for i, (w, d) in enumerate(zip(widths, depths))]
    sd_prob = kwargs.pop("stochastic_depth_prob", sd_prob)
    return ConvNeXt(setting, stochastic_depth_prob=sd_prob, **kwargs)


@register_model()
def convnext_tiny(*, weights=None, progress=True, **kwargs):
    """ConvNeXt-T: widths 96-192-384-768, depths 3-3-9-3, stochastic depth 0.1."""
    return _convnext("convnext_tiny", [96, 192, 384, 768], [3, 3, 9, 3], 0.1, weights, progress,
                     kwargs)


@register_model()
def convnext_small(*, weights=None, progress=True, **kwargs):
    """ConvNeXt-S: widths 96-192-384-768, depths 3-3-27-3, stochastic depth 0.4."""
    return _convnext("convnext_small", [96, 192, 384, 768], [3, 3, 27, 3], 0.4, weights, progress,
                     kwargs)


@register_model()
def convnext_base(*, weights=None, progress=True, **kwargs):
    """ConvNeXt-B: widths 128-256-512-1024, depths 3-3-27-3, stochastic depth 0.5."""
    return _convnext("convnext_base", [128, 256, 512, 1024], [3, 3, 27, 3], 0.5, weights, progress,
                     kwargs)


@register_model()
def convnext_large(*, weights=None, progress=True, **kwargs):
    """ConvNeXt-L: widths 192-384-768-1536, depths 3-3-27-3, stochastic depth 0.5."""
    return _convnext("convnext_large", [192, 384, 768, 1536], [3, 3, 27, 3], 0.5, weights,
                     progress, kwargs)
