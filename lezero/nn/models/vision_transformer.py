"""The Vision Transformer (Dosovitskiy et al., 2021) as torchvision builds it:
``VisionTransformer`` and vit_b_16, vit_b_32, vit_l_16, vit_l_32, vit_h_14.

``conv_proj`` cuts the image into patches (a stride-``patch_size`` convolution, or a
convolutional stem from ``conv_stem_configs``); a learnt ``class_token`` is prepended,
``encoder.pos_embedding`` added, and ``encoder.layers.encoder_layer_{i}`` (pre-norm
blocks: ``ln_1``, ``self_attention`` (``nn.MultiheadAttention``, batch first),
``ln_2``, ``mlp`` laid out as ``torchvision.ops.MLP``: keys ``mlp.0``, ``mlp.3``) and
``encoder.ln`` follow; ``heads.head`` (after ``heads.pre_logits`` and tanh with
``representation_size``) classifies the class token.  Keys are torchvision's.
"""
import functools
import math
from collections import OrderedDict
from typing import Callable, NamedTuple

import numpy as np

import lezero.functions as F
from lezero import nn
from lezero.core import Parameter
from lezero.nn.layers.vision import Conv2dNormActivation
from lezero.nn.models._weights import check_weights
from lezero.nn.models.mlp import MLP
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["ConvStemConfig", "MLPBlock", "EncoderBlock", "Encoder", "VisionTransformer",
           "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]


class ConvStemConfig(NamedTuple):
    """One convolution of a convolutional stem (Xiao et al., 2021)."""
    out_channels: int
    kernel_size: int
    stride: int
    norm_layer: Callable = nn.BatchNorm2d
    activation_layer: Callable = nn.ReLU


class MLPBlock(MLP):
    """The encoder's feed-forward block: Linear to ``mlp_dim``, GELU, dropout, Linear back,
    dropout; Xavier-uniform weights and N(0, 1e-6) biases."""

    def __init__(self, in_dim, mlp_dim, dropout):
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.normal_(m.bias, std=1e-6)


_LN = functools.partial(nn.LayerNorm, eps=1e-6)


class EncoderBlock(nn.Module):
    """x + attention(LN(x)), then + MLP(LN(.)): one pre-norm Transformer block."""

    def __init__(self, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                 norm_layer=_LN):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads,
                                                    dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input):
        if input.ndim != 3:
            raise ValueError(f"EncoderBlock: input must be (batch, seq, hidden_dim), got "
                             f"shape {input.shape}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Position embedding (N(0, 0.02), as BERT's), dropout, ``num_layers`` blocks, LN."""

    def __init__(self, seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                 attention_dropout, norm_layer=_LN):
        super().__init__()
        self.pos_embedding = Parameter(np.zeros((1, seq_length, hidden_dim), np.float32))
        nn.init.normal_(self.pos_embedding, std=0.02)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout,
                                                attention_dropout, norm_layer))
            for i in range(num_layers)))
        self.ln = norm_layer(hidden_dim)

    def forward(self, input):
        if input.ndim != 3:
            raise ValueError(f"Encoder: input must be (batch, seq, hidden_dim), got shape "
                             f"{input.shape}")
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


def _conv_stem(configs, hidden_dim):
    """torchvision's convolutional stem: ``conv_bn_relu_{i}`` then a 1x1 ``conv_last``."""
    stem, channels = nn.Sequential(), 3
    for i, cfg in enumerate(configs):
        stem.add_module(f"conv_bn_relu_{i}", Conv2dNormActivation(
            channels, cfg.out_channels, kernel_size=cfg.kernel_size, stride=cfg.stride,
            norm_layer=cfg.norm_layer, activation_layer=cfg.activation_layer))
        channels = cfg.out_channels
    stem.add_module("conv_last", nn.Conv2d(channels, hidden_dim, kernel_size=1))
    return stem


class VisionTransformer(nn.Module):
    """ViT for ``image_size`` x ``image_size`` inputs (a multiple of ``patch_size``):
    ``num_layers`` blocks of width ``hidden_dim`` with ``num_heads`` heads and
    ``mlp_dim``-wide MLPs."""

    def __init__(self, image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim,
                 dropout=0.0, attention_dropout=0.0, num_classes=1000,
                 representation_size=None, norm_layer=_LN, conv_stem_configs=None):
        super().__init__()
        name = "VisionTransformer"
        for arg, v in (("image_size", image_size), ("patch_size", patch_size),
                       ("num_layers", num_layers), ("num_heads", num_heads),
                       ("hidden_dim", hidden_dim), ("mlp_dim", mlp_dim),
                       ("num_classes", num_classes)):
            check_int(name, arg, v, low=1)
        check_int(name, "representation_size", representation_size, low=1, allow_none=True)
        check_number(name, "dropout", dropout, 0.0, 1.0)
        check_number(name, "attention_dropout", attention_dropout, 0.0, 1.0)
        if image_size % patch_size:
            raise ValueError(f"{name}: image_size ({image_size}) must be a multiple of "
                             f"patch_size ({patch_size})")
        self.image_size, self.patch_size = image_size, patch_size
        self.hidden_dim, self.mlp_dim = hidden_dim, mlp_dim
        self.dropout, self.attention_dropout = dropout, attention_dropout
        self.num_classes, self.representation_size = num_classes, representation_size
        self.norm_layer = norm_layer
        if conv_stem_configs is not None:
            self.conv_proj = _conv_stem(conv_stem_configs, hidden_dim)
        else:
            self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.class_token = Parameter(np.zeros((1, 1, hidden_dim), np.float32))
        self.seq_length = (image_size // patch_size) ** 2 + 1
        self.encoder = Encoder(self.seq_length, num_layers, num_heads, hidden_dim, mlp_dim,
                               dropout, attention_dropout, norm_layer)
        heads = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)
        self._init_weights()

    def _init_weights(self):
        """torchvision's: a truncated-normal patchify stem (std sqrt(1 / fan_in)) or a
        N(0, 2 / C) last stem convolution, the same for pre_logits, and a zero head."""
        if isinstance(self.conv_proj, nn.Conv2d):
            fan_in = 3 * self.patch_size ** 2
            nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
            nn.init.zeros_(self.conv_proj.bias)
        else:
            last = self.conv_proj.conv_last
            nn.init.normal_(last.weight, 0.0, math.sqrt(2.0 / last.out_channels))
            nn.init.zeros_(last.bias)
        if self.representation_size is not None:
            pre = self.heads.pre_logits
            nn.init.trunc_normal_(pre.weight, std=math.sqrt(1 / pre.in_features))
            nn.init.zeros_(pre.bias)
        nn.init.zeros_(self.heads.head.weight)
        nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x):
        """(N, 3, H, W) -> (N, patches, hidden_dim)."""
        if x.ndim != 4 or x.shape[2:] != (self.image_size, self.image_size):
            raise ValueError(f"VisionTransformer: input must be (N, 3, {self.image_size}, "
                             f"{self.image_size}) (image_size), got shape {x.shape}")
        n, p = x.shape[0], self.patch_size
        x = self.conv_proj(x)
        x = F.reshape(x, (n, self.hidden_dim, (self.image_size // p) ** 2))
        return F.transpose(x, (0, 2, 1))

    def forward(self, x):
        x = self._process_input(x)
        token = F.broadcast_to(self.class_token, (x.shape[0], 1, self.hidden_dim))
        x = self.encoder(F.concatenate([token, x], axis=1))
        return self.heads(x[:, 0])


def _vit(name, patch_size, num_layers, num_heads, hidden_dim, mlp_dim, weights, progress,
         kwargs):
    check_weights(name, weights, progress)
    image_size = kwargs.pop("image_size", 224)
    return VisionTransformer(image_size=image_size, patch_size=patch_size,
                             num_layers=num_layers, num_heads=num_heads, hidden_dim=hidden_dim,
                             mlp_dim=mlp_dim, **kwargs)


@register_model()
def vit_b_16(*, weights=None, progress=True, **kwargs):
    """ViT-B/16: 12 layers, 12 heads, width 768, MLP 3072; ``image_size`` (default 224)
    and the other ``VisionTransformer`` arguments as keywords."""
    return _vit("vit_b_16", 16, 12, 12, 768, 3072, weights, progress, kwargs)


@register_model()
def vit_b_32(*, weights=None, progress=True, **kwargs):
    """ViT-B/32: 12 layers, 12 heads, width 768, MLP 3072."""
    return _vit("vit_b_32", 32, 12, 12, 768, 3072, weights, progress, kwargs)


@register_model()
def vit_l_16(*, weights=None, progress=True, **kwargs):
    """ViT-L/16: 24 layers, 16 heads, width 1024, MLP 4096."""
    return _vit("vit_l_16", 16, 24, 16, 1024, 4096, weights, progress, kwargs)


@register_model()
def vit_l_32(*, weights=None, progress=True, **kwargs):
    """ViT-L/32: 24 layers, 16 heads, width 1024, MLP 4096."""
    return _vit("vit_l_32", 32, 24, 16, 1024, 4096, weights, progress, kwargs)


@register_model()
def vit_h_14(*, weights=None, progress=True, **kwargs):
    """ViT-H/14: 32 layers, 16 heads, width 1280, MLP 5120."""
    return _vit("vit_h_14", 14, 32, 16, 1280, 5120, weights, progress, kwargs)
