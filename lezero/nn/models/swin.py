"""The Swin Transformer (Liu et al., 2021) as torchvision builds it: ``SwinTransformer``
and swin_t, swin_s, swin_b.

``features.0`` embeds 4x4 patches (convolution, ``Permute`` to NHWC, LayerNorm); then
stages of ``SwinTransformerBlock``s (``norm1``, ``attn`` = ``ShiftedWindowAttention`` with
``qkv``, ``proj``, ``relative_position_bias_table`` and the ``relative_position_index``
buffer, ``norm2``, ``mlp`` as ``torchvision.ops.MLP``), with ``PatchMerging``
(``reduction``, ``norm``) between stages; ``norm``, ``permute``, ``avgpool``,
``flatten`` and ``head`` end it.  Every second block shifts its windows by half a
window.  Keys are torchvision's.

The window attention is composed from LeZero operators (pad, roll, reshape, transpose,
linear, matmul, softmax), so its gradient is theirs; the shifted-window mask is a
constant computed from the padded map's size.
"""
import functools

import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.core import Parameter
from lezero.nn.layers.vision import Permute, StochasticDepth
from lezero.nn.models._weights import check_weights
from lezero.nn.models.mlp import MLP
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, ntuple

__all__ = ["shifted_window_attention", "ShiftedWindowAttention", "PatchMerging",
           "SwinTransformerBlock", "SwinTransformer", "swin_t", "swin_s", "swin_b"]


def _patch_merging_pad(x):
    """(B, H, W, C) -> (B, ceil(H/2), ceil(W/2), 4C): each 2x2 neighbourhood's four
    vectors side by side (odd sizes padded with zeros first)."""
    _, h, w, _ = x.shape
    if h % 2 or w % 2:
        x = F.pad(x, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)))
    parts = [x[:, i::2, j::2, :] for i, j in ((0, 0), (1, 0), (0, 1), (1, 1))]
    return F.concatenate(parts, axis=-1)


class PatchMerging(nn.Module):
    """Halve the resolution and double the width: merge 2x2 patches (4C), normalise,
    project to 2C without bias."""

    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x):
        return self.reduction(self.norm(_patch_merging_pad(x)))


def _shift_mask(xp, pad_h, pad_w, window, shift):
    """(windows, N, N): -100 where two tokens of a shifted window come from different
    regions of the map before the cyclic shift (they must not attend), 0 elsewhere."""
    region = np.zeros((pad_h, pad_w), np.float32)
    count = 0
    for hs in ((0, -window[0]), (-window[0], -shift[0]), (-shift[0], None)):
        for ws in ((0, -window[1]), (-window[1], -shift[1]), (-shift[1], None)):
            region[hs[0]:hs[1], ws[0]:ws[1]] = count
            count += 1
    region = region.reshape(pad_h // window[0], window[0], pad_w // window[1], window[1])
    region = region.transpose(0, 2, 1, 3).reshape(-1, window[0] * window[1])
    mask = np.where(region[:, None, :] - region[:, :, None] != 0, -100.0, 0.0)
    return xp.asarray(mask.astype(np.float32))


def _windows(x, window):
    """(B, H, W, C) -> (B * windows, window area, C), windows in row-major order."""
    b, h, w, c = x.shape
    x = F.reshape(x, (b, h // window[0], window[0], w // window[1], window[1], c))
    x = F.transpose(x, (0, 1, 3, 2, 4, 5))
    return F.reshape(x, (-1, window[0] * window[1], c))


def _unwindows(x, window, b, h, w):
    """The inverse of ``_windows``."""
    c = x.shape[-1]
    x = F.reshape(x, (b, h // window[0], w // window[1], window[0], window[1], c))
    x = F.transpose(x, (0, 1, 3, 2, 4, 5))
    return F.reshape(x, (b, h, w, c))


def _attention(x, qkv_weight, qkv_bias, bias, mask, num_heads, attention_dropout, training):
    """Multi-head self-attention inside each window, scores + ``bias`` (+ ``mask``)."""
    n, length, c = x.shape
    head = c // num_heads
    qkv = F.reshape(F.linear(x, qkv_weight, qkv_bias), (n, length, 3, num_heads, head))
    q, k, v = (F.squeeze(t, 0) for t in F.split(F.transpose(qkv, (2, 0, 3, 1, 4)), 3, 0))
    attn = F.matmul(q * (head ** -0.5), F.swapaxes(k, -2, -1)) + bias
    if mask is not None:
        windows = mask.shape[0]
        attn = F.reshape(attn, (n // windows, windows, num_heads, length, length))
        attn = F.reshape(attn + mask[None, :, None], (n, num_heads, length, length))
    attn = F.dropout(F.softmax(attn, axis=-1), attention_dropout, training=training)
    return F.reshape(F.swapaxes(F.matmul(attn, v), 1, 2), (n, length, c))


def shifted_window_attention(input, qkv_weight, proj_weight, relative_position_bias,
                             window_size, num_heads, shift_size, attention_dropout=0.0,
                             dropout=0.0, qkv_bias=None, proj_bias=None, training=True):
    """Window multi-head self-attention with relative position bias, on (B, H, W, C),
    as ``torchvision.models.swin_transformer.shifted_window_attention``: the map is
    padded to whole windows, cyclically shifted by ``shift_size`` (no shift along a dim
    the window already covers), attended window by window (with the mask that keeps the
    wrapped-around regions apart), projected, shifted back and cropped."""
    b, h, w, c = input.shape
    window = list(window_size)
    pad_b, pad_r = (-h) % window[0], (-w) % window[1]
    x = F.pad(input, ((0, 0), (0, pad_b), (0, pad_r), (0, 0))) if pad_b or pad_r else input
    pad_h, pad_w = h + pad_b, w + pad_r
    shift = [0 if window[0] >= pad_h else shift_size[0],
             0 if window[1] >= pad_w else shift_size[1]]
    shifted = sum(shift) > 0
    if shifted:
        x = F.roll(x, (-shift[0], -shift[1]), axis=(1, 2))
    xp = cuda.get_array_module(input.data if hasattr(input, "data") else input)
    mask = _shift_mask(xp, pad_h, pad_w, window, shift) if shifted else None
    x = _attention(_windows(x, window), qkv_weight, qkv_bias, relative_position_bias, mask,
                   num_heads, attention_dropout, training)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), dropout, training=training)
    x = _unwindows(x, window, b, pad_h, pad_w)
    if shifted:
        x = F.roll(x, (shift[0], shift[1]), axis=(1, 2))
    return x[:, :h, :w, :] if pad_b or pad_r else x


def _relative_position_index(window):
    """(N * N,) int64: for each pair of tokens of a window, the row of the bias table
    holding their relative offset (dy, dx)."""
    coords = np.stack(np.meshgrid(np.arange(window[0]), np.arange(window[1]), indexing="ij"))
    coords = coords.reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)
    rel[:, :, 0] += window[0] - 1
    rel[:, :, 1] += window[1] - 1
    rel[:, :, 0] *= 2 * window[1] - 1
    return rel.sum(-1).reshape(-1).astype(np.int64)


class ShiftedWindowAttention(nn.Module):
    """``shifted_window_attention`` with its parameters: ``qkv``, ``proj`` and one learnt
    bias per head and relative offset (``relative_position_bias_table``,
    ((2 Wh - 1)(2 Ww - 1), heads), truncated N(0, 0.02))."""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__()
        name = "ShiftedWindowAttention"
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError(f"{name}: window_size and shift_size must be of length 2, got "
                             f"{window_size!r} and {shift_size!r}")
        check_int(name, "dim", dim, low=1)
        check_int(name, "num_heads", num_heads, low=1)
        if dim % num_heads:
            raise ValueError(f"{name}: dim ({dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.window_size = list(ntuple(name, "window_size", window_size, 2, low=1))
        self.shift_size = list(ntuple(name, "shift_size", shift_size, 2, low=0))
        self.num_heads = num_heads
        self.attention_dropout = check_number(name, "attention_dropout", attention_dropout,
                                              0.0, 1.0)
        self.dropout = check_number(name, "dropout", dropout, 0.0, 1.0)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        size = (2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1)
        self.relative_position_bias_table = Parameter(np.zeros((size, num_heads), np.float32))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer("relative_position_index",
                             _relative_position_index(self.window_size))

    def get_relative_position_bias(self):
        """(1, heads, N, N): the table's rows for every pair of tokens of a window."""
        n = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[self.relative_position_index]
        return F.expand_dims(F.transpose(F.reshape(bias, (n, n, -1)), (2, 0, 1)), 0)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"ShiftedWindowAttention: input must be (B, H, W, C), got shape "
                             f"{x.shape}")
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class SwinTransformerBlock(nn.Module):
    """x + attn(norm1(x)), then + mlp(norm2(.)), each branch through stochastic depth."""

    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttention):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads,
                               attention_dropout=attention_dropout, dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU,
                       dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x):
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformer(nn.Module):
    """Swin: ``patch_size`` (2 ints) patches embedded to ``embed_dim``; stage i has
    ``depths[i]`` blocks of width ``embed_dim * 2**i`` with ``num_heads[i]`` heads and
    ``window_size`` (2 ints) windows; stochastic depth grows linearly to
    ``stochastic_depth_prob``."""

    def __init__(self, patch_size, embed_dim, depths, num_heads, window_size, mlp_ratio=4.0,
                 dropout=0.0, attention_dropout=0.0, stochastic_depth_prob=0.1,
                 num_classes=1000, norm_layer=None, block=None, downsample_layer=PatchMerging):
        super().__init__()
        name = "SwinTransformer"
        patch = ntuple(name, "patch_size", patch_size, 2, low=1)
        check_int(name, "embed_dim", embed_dim, low=1)
        check_int(name, "num_classes", num_classes, low=1)
        if len(depths) != len(num_heads) or not depths:
            raise ValueError(f"{name}: depths and num_heads must be non-empty lists of one "
                             f"entry per stage, got {depths!r} and {num_heads!r}")
        check_number(name, "stochastic_depth_prob", stochastic_depth_prob, 0.0, 1.0)
        self.num_classes = num_classes
        block = block or SwinTransformerBlock
        norm_layer = norm_layer or functools.partial(nn.LayerNorm, eps=1e-5)
        layers = [nn.Sequential(nn.Conv2d(3, embed_dim, kernel_size=patch, stride=patch),
                                Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total, index = sum(depths), 0
        for stage, (depth, heads) in enumerate(zip(depths, num_heads)):
            dim = embed_dim * 2 ** stage
            blocks = []
            for i in range(depth):
                sd_prob = stochastic_depth_prob * index / max(total - 1, 1)
                blocks.append(block(dim, heads, window_size=window_size,
                                    shift_size=[0 if i % 2 == 0 else w // 2 for w in window_size],
                                    mlp_ratio=mlp_ratio, dropout=dropout,
                                    attention_dropout=attention_dropout,
                                    stochastic_depth_prob=sd_prob, norm_layer=norm_layer))
                index += 1
            layers.append(nn.Sequential(*blocks))
            if stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


def _swin(name, embed_dim, depths, num_heads, sd_prob, weights, progress, kwargs):
    check_weights(name, weights, progress)
    return SwinTransformer(patch_size=[4, 4], embed_dim=embed_dim, depths=depths,
                           num_heads=num_heads, window_size=[7, 7],
                           stochastic_depth_prob=sd_prob, **kwargs)


@register_model()
def swin_t(*, weights=None, progress=True, **kwargs):
    """Swin-T: width 96, depths 2-2-6-2, heads 3-6-12-24, 7x7 windows, stochastic depth
    0.2; ``kwargs`` go to ``SwinTransformer``."""
    return _swin("swin_t", 96, [2, 2, 6, 2], [3, 6, 12, 24], 0.2, weights, progress, kwargs)


@register_model()
def swin_s(*, weights=None, progress=True, **kwargs):
    """Swin-S: width 96, depths 2-2-18-2, heads 3-6-12-24, stochastic depth 0.3."""
    return _swin("swin_s", 96, [2, 2, 18, 2], [3, 6, 12, 24], 0.3, weights, progress, kwargs)


@register_model()
def swin_b(*, weights=None, progress=True, **kwargs):
    """Swin-B: width 128, depths 2-2-18-2, heads 4-8-16-32, stochastic depth 0.5."""
    return _swin("swin_b", 128, [2, 2, 18, 2], [4, 8, 16, 32], 0.5, weights, progress, kwargs)
