"""U-Net (Ronneberger et al., 2015) for semantic segmentation, in the layout of the widely
used PyTorch implementation (milesial/Pytorch-UNet): ``inc``, ``down1``..``down4``,
``up1``..``up4``, ``outc``; each ``DoubleConv`` is ``double_conv`` = (3x3 conv, BN, ReLU)
twice.  Convolutions are padded ("same"), so the output mask has the input's size, and
``base_channels`` (64 in the paper) scales every width.

``forward`` returns per-pixel class logits (N, n_classes, H, W); ``iou_per_class`` and
``mean_iou`` score predicted masks.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_bool, check_int

__all__ = ["UNet", "DoubleConv", "Down", "Up", "OutConv", "iou_per_class", "mean_iou"]


class DoubleConv(nn.Module):
    """(3x3 convolution, batch norm, ReLU) twice."""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        mid = mid_channels or out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU(), nn.Conv2d(mid, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """2x2 max pooling then a DoubleConv."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upsample (a 2x2 transposed convolution, or bilinear interpolation), concatenate
    the skip connection, then a DoubleConv."""

    def __init__(self, in_channels, out_channels, bilinear=False):
        super().__init__()
        self.bilinear = bilinear
        if bilinear:
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, 2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        if self.bilinear:
            x1 = F.interpolate(x1, scale_factor=2, mode="bilinear", align_corners=True)
        else:
            x1 = self.up(x1)
        dy, dx = x2.shape[2] - x1.shape[2], x2.shape[3] - x1.shape[3]
        if dy or dx:                 # odd sizes: pad the upsampled map to the skip's size
            x1 = F.pad(x1, ((0, 0), (0, 0), (dy // 2, dy - dy // 2), (dx // 2, dx - dx // 2)))
        return self.conv(F.concatenate([x2, x1], axis=1))


class OutConv(nn.Module):
    """1x1 convolution to class logits."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x):
        return self.conv(x)


@register_model("unet")
class UNet(nn.Module):
    """U-Net: ``n_channels`` input channels, ``n_classes`` output logits per pixel, four
    2x poolings (input sides should be multiples of 16; others are padded back)."""

    def __init__(self, n_channels=3, n_classes=2, bilinear=False, base_channels=64):
        super().__init__()
        check_int("UNet", "n_channels", n_channels, low=1)
        check_int("UNet", "n_classes", n_classes, low=1)
        check_bool("UNet", "bilinear", bilinear)
        c = check_int("UNet", "base_channels", base_channels, low=2)
        self.n_channels, self.n_classes, self.bilinear = n_channels, n_classes, bilinear
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, c)
        self.down1, self.down2 = Down(c, 2 * c), Down(2 * c, 4 * c)
        self.down3, self.down4 = Down(4 * c, 8 * c), Down(8 * c, 16 * c // factor)
        self.up1 = Up(16 * c, 8 * c // factor, bilinear)
        self.up2 = Up(8 * c, 4 * c // factor, bilinear)
        self.up3 = Up(4 * c, 2 * c // factor, bilinear)
        self.up4 = Up(2 * c, c, bilinear)
        self.outc = OutConv(c, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x = self.up1(self.down4(x4), x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        return self.outc(self.up4(x, x1))


def iou_per_class(pred, target, num_classes):
    """Intersection over union of each class over a whole set of masks: ``pred`` and
    ``target`` integer arrays of one shape.  A class absent from both gets NaN."""
    pred, target = cuda.as_numpy(pred), cuda.as_numpy(target)
    if pred.shape != target.shape:
        raise ValueError(f"iou_per_class: pred {pred.shape} and target {target.shape} "
                         "must have one shape")
    out = np.full(num_classes, np.nan)
    for c in range(num_classes):
        p, t = pred == c, target == c
        union = np.logical_or(p, t).sum()
        if union:
            out[c] = np.logical_and(p, t).sum() / union
    return out


def mean_iou(pred, target, num_classes, ignore_background=False):
    """The mean of ``iou_per_class`` over the classes present (from class 1 when
    ``ignore_background``)."""
    ious = iou_per_class(pred, target, num_classes)[1 if ignore_background else 0:]
    return float(np.nanmean(ious)) if np.isfinite(ious).any() else float("nan")
