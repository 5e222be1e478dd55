"""Transforms on NumPy images, with torchvision's names.

Layout.  Decoders (Pillow) give images as ``(H, W, C)`` (or ``(H, W)``) uint8 arrays, and
spatial transforms work on that layout by default, as torchvision applies them before
``ToTensor``.  ``ToCHW`` moves channels first; ``Normalize`` then works on ``(C, H, W)``
like torchvision's.  Spatial transforms take ``layout="CHW"`` for channel-first input.
A typical pipeline::

    Compose([RandomResizedCrop(32), RandomHorizontalFlip(), ToFloat(), ToCHW(),
             Normalize(mean, std)])

Randomness.  Random transforms draw from ``lezero.data.get_rng()`` (the current batch's
generator inside a DataLoader: reproducible whatever the worker count, different in each
batch), or from ``generator`` when one is given.
"""
import math
import numbers

import numpy as np

from lezero.data._random import check_generator, get_rng
from lezero.utils.checks import check_number

__all__ = ["Compose", "Lambda", "RandomApply", "ToFloat", "ToCHW", "Normalize", "Pad",
           "CenterCrop", "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip",
           "Resize", "RandomResizedCrop", "resize"]


class Compose:
    """Apply ``transforms`` one after another."""

    def __init__(self, transforms):
        self.transforms = list(transforms)
        for t in self.transforms:
            if not callable(t):
                raise TypeError(f"Compose: every transform must be callable, got "
                                f"{type(t).__name__}")

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self):
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose([{inner}\n])"


class Lambda:
    """Wrap a function as a transform (use a module-level function for spawned workers)."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"Lambda: fn must be callable, got {type(fn).__name__}")
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


class _Random:
    """Base of random transforms: where the random numbers come from."""

    def __init__(self, generator=None):
        self.generator = check_generator(type(self).__name__, generator)

    def rng(self):
        return self.generator if self.generator is not None else get_rng()


def _check_p(owner, p):
    p = check_number(owner, "p", p)
    if not 0 <= p <= 1:
        raise ValueError(f"{owner}: p must be a probability in [0, 1], got {p!r}")
    return p


class RandomApply(_Random):
    """Apply all of ``transforms`` with probability ``p``, else none of them."""

    def __init__(self, transforms, p=0.5, generator=None):
        super().__init__(generator)
        self.transform = Compose(transforms)
        self.p = _check_p("RandomApply", p)

    def __call__(self, x):
        return self.transform(x) if self.rng().random() < self.p else x


class ToFloat:
    """Convert to a float array (float32 by default); uint8 input is scaled to [0, 1]
    (like torchvision's ``ToTensor``) unless ``scale=False``."""

    def __init__(self, dtype=np.float32, scale=True):
        self.dtype = np.dtype(dtype)
        if self.dtype.kind != "f":
            raise TypeError(f"ToFloat: dtype must be a float dtype, got {self.dtype}")
        self.scale = scale

    def __call__(self, x):
        x = np.asarray(x)
        if self.scale and x.dtype == np.uint8:
            return x.astype(self.dtype) * self.dtype.type(1 / 255)
        return x.astype(self.dtype, copy=False)


class ToCHW:
    """``(H, W, C)`` -> ``(C, H, W)``; ``(H, W)`` -> ``(1, H, W)``."""

    def __call__(self, x):
        x = np.asarray(x)
        if x.ndim == 2:
            return x[None]
        if x.ndim != 3:
            raise ValueError(f"ToCHW: expected an (H, W) or (H, W, C) image, got shape "
                             f"{x.shape}")
        return np.ascontiguousarray(x.transpose(2, 0, 1))


class Normalize:
    """``(x - mean) / std`` per channel of a ``(C, H, W)`` float array (or ``(H, W)`` with
    one mean and std)."""

    def __init__(self, mean, std):
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1)
        if self.mean.shape != self.std.shape:
            raise ValueError(f"Normalize: mean and std differ in length "
                             f"({self.mean.size} vs {self.std.size})")
        if np.any(self.std == 0):
            raise ValueError(f"Normalize: std must not contain zeros, got {self.std}")

    def __call__(self, x):
        x = np.asarray(x)
        if x.dtype.kind != "f":
            raise TypeError(f"Normalize: expected a float image (apply ToFloat first), got "
                            f"dtype {x.dtype}")
        c = x.shape[0] if x.ndim == 3 else 1
        if self.mean.size not in (1, c):
            raise ValueError(f"Normalize: {self.mean.size} means for an image with {c} "
                             f"channels (shape {x.shape}); Normalize expects (C, H, W)")
        shape = (-1, 1, 1) if x.ndim == 3 else (-1, 1)
        mean = self.mean.astype(x.dtype).reshape(shape)
        std = self.std.astype(x.dtype).reshape(shape)
        return (x - mean) / std

    def __repr__(self):
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


# ----- spatial transforms ------------------------------------------------------------------

def _hw_axes(x, layout, owner):
    if layout not in ("HWC", "CHW"):
        raise ValueError(f"{owner}: layout must be 'HWC' or 'CHW', got {layout!r}")
    if x.ndim == 2:
        return 0, 1
    if x.ndim != 3:
        raise ValueError(f"{owner}: expected an (H, W) or 3-D image, got shape {x.shape}")
    return (0, 1) if layout == "HWC" else (1, 2)


def _size2(owner, size):
    if isinstance(size, numbers.Integral):
        size = (size, size)
    size = tuple(size)
    if len(size) != 2 or not all(isinstance(s, numbers.Integral) and s > 0 for s in size):
        raise ValueError(f"{owner}: size must be a positive int or (height, width), got "
                         f"{size!r}")
    return int(size[0]), int(size[1])


def _crop(x, top, left, h, w, axes):
    index = [slice(None)] * x.ndim
    index[axes[0]] = slice(top, top + h)
    index[axes[1]] = slice(left, left + w)
    return x[tuple(index)]


def _pad(x, padding, fill, mode, axes, owner):
    """``padding``: int, (left/right, top/bottom) or (left, top, right, bottom)."""
    if isinstance(padding, numbers.Integral):
        padding = (padding,) * 4
    padding = tuple(int(p) for p in padding)
    if len(padding) == 2:
        padding = padding * 2
    if len(padding) != 4 or min(padding) < 0:
        raise ValueError(f"{owner}: padding must be a non-negative int or a 2- or 4-tuple, "
                         f"got {padding!r}")
    left, top, right, bottom = padding
    widths = [(0, 0)] * x.ndim
    widths[axes[0]], widths[axes[1]] = (top, bottom), (left, right)
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=fill)
    if mode not in ("edge", "reflect", "symmetric"):
        raise ValueError(f"{owner}: padding_mode must be 'constant', 'edge', 'reflect' or "
                         f"'symmetric', got {mode!r}")
    return np.pad(x, widths, mode=mode)


class Pad:
    """Pad the borders (``padding`` as in torchvision: int, (lr, tb) or (l, t, r, b))."""

    def __init__(self, padding, fill=0, padding_mode="constant", layout="HWC"):
        self.padding, self.fill, self.padding_mode, self.layout = (padding, fill, padding_mode,
                                                                   layout)

    def __call__(self, x):
        x = np.asarray(x)
        return _pad(x, self.padding, self.fill, self.padding_mode,
                    _hw_axes(x, self.layout, "Pad"), "Pad")


class CenterCrop:
    """Crop the central ``size`` (int or (h, w)) region."""

    def __init__(self, size, layout="HWC"):
        self.size = _size2("CenterCrop", size)
        self.layout = layout

    def __call__(self, x):
        x = np.asarray(x)
        axes = _hw_axes(x, self.layout, "CenterCrop")
        H, W = x.shape[axes[0]], x.shape[axes[1]]
        h, w = self.size
        if h > H or w > W:
            raise ValueError(f"CenterCrop: crop {self.size} is larger than the image "
                             f"{(H, W)}")
        return _crop(x, (H - h) // 2, (W - w) // 2, h, w, axes)


class RandomCrop(_Random):
    """Crop a random ``size`` region, after optional ``padding`` (as torchvision)."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0,
                 padding_mode="constant", layout="HWC", generator=None):
        super().__init__(generator)
        self.size = _size2("RandomCrop", size)
        self.padding, self.pad_if_needed = padding, pad_if_needed
        self.fill, self.padding_mode, self.layout = fill, padding_mode, layout

    def __call__(self, x):
        x = np.asarray(x)
        axes = _hw_axes(x, self.layout, "RandomCrop")
        if self.padding is not None:
            x = _pad(x, self.padding, self.fill, self.padding_mode, axes, "RandomCrop")
        h, w = self.size
        H, W = x.shape[axes[0]], x.shape[axes[1]]
        if self.pad_if_needed and (H < h or W < w):
            dh, dw = max(0, h - H), max(0, w - W)
            x = _pad(x, (dw, dh), self.fill, self.padding_mode, axes, "RandomCrop")
            H, W = x.shape[axes[0]], x.shape[axes[1]]
        if H < h or W < w:
            raise ValueError(f"RandomCrop: crop {self.size} is larger than the image "
                             f"{(H, W)} (pass pad_if_needed=True)")
        rng = self.rng()
        top = int(rng.integers(0, H - h + 1))
        left = int(rng.integers(0, W - w + 1))
        return _crop(x, top, left, h, w, axes)


class _RandomFlip(_Random):
    _axis = 0    # 0: flip the height axis (vertical), 1: the width axis (horizontal)

    def __init__(self, p=0.5, layout="HWC", generator=None):
        super().__init__(generator)
        self.p = _check_p(type(self).__name__, p)
        self.layout = layout

    def __call__(self, x):
        x = np.asarray(x)
        axes = _hw_axes(x, self.layout, type(self).__name__)
        if self.rng().random() < self.p:
            return np.flip(x, axes[self._axis])
        return x


class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right with probability ``p``."""
    _axis = 1


class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom with probability ``p``."""
    _axis = 0


def _resize_axis(x, axis, out):
    """Linear interpolation along one axis, sampling pixel centres as PyTorch's
    ``interpolate(mode='bilinear', align_corners=False)`` does (no antialiasing)."""
    n = x.shape[axis]
    if n == out:
        return x
    src = (np.arange(out, dtype=np.float64) + 0.5) * (n / out) - 0.5
    src = np.clip(src, 0, None)
    i0 = np.minimum(src.astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    frac = (src - i0).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = out
    frac = frac.reshape(shape)
    a, b = np.take(x, i0, axis=axis), np.take(x, i1, axis=axis)
    return a + (b - a) * frac


def resize(x, size, layout="HWC"):
    """Bilinear resize of an image to ``size`` = (height, width); the dtype is kept
    (integer images are rounded and clipped back to their range)."""
    x = np.asarray(x)
    axes = _hw_axes(x, layout, "resize")
    h, w = _size2("resize", size)
    y = x.astype(np.float32, copy=False) if x.dtype != np.float64 else x
    y = _resize_axis(_resize_axis(y, axes[0], h), axes[1], w)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(x.dtype)
    return y.astype(x.dtype, copy=False)


class Resize:
    """Resize to ``size``: (h, w), or an int that the shorter side is scaled to (keeping the
    aspect ratio, as torchvision)."""

    def __init__(self, size, layout="HWC"):
        if isinstance(size, numbers.Integral):
            if size <= 0:
                raise ValueError(f"Resize: size must be positive, got {size}")
        else:
            size = _size2("Resize", size)
        self.size, self.layout = size, layout

    def __call__(self, x):
        x = np.asarray(x)
        axes = _hw_axes(x, self.layout, "Resize")
        size = self.size
        if isinstance(size, numbers.Integral):
            H, W = x.shape[axes[0]], x.shape[axes[1]]
            short, long_ = (H, W) if H <= W else (W, H)
            other = int(size * long_ / short)
            size = (size, other) if H <= W else (other, size)
        return resize(x, size, self.layout)


class RandomResizedCrop(_Random):
    """Crop a random region of random area (``scale`` of the image) and aspect ratio
    (``ratio``, sampled log-uniformly), then resize it to ``size`` (as torchvision)."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), layout="HWC",
                 generator=None):
        super().__init__(generator)
        self.size = _size2("RandomResizedCrop", size)
        if not (0 < scale[0] <= scale[1] <= 1):
            raise ValueError(f"RandomResizedCrop: scale must satisfy 0 < min <= max <= 1, "
                             f"got {scale!r}")
        if not (0 < ratio[0] <= ratio[1]):
            raise ValueError(f"RandomResizedCrop: ratio must satisfy 0 < min <= max, got "
                             f"{ratio!r}")
        self.scale, self.ratio, self.layout = tuple(scale), tuple(ratio), layout

    def params(self, H, W, rng):
        """(top, left, height, width) of the crop; falls back to a central crop after 10
        rejected tries, as torchvision does."""
        area = H * W
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        for _ in range(10):
            target = area * rng.uniform(*self.scale)
            aspect = math.exp(rng.uniform(log_lo, log_hi))
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= W and 0 < h <= H:
                return int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1)), h, w
        in_ratio = W / H
        if in_ratio < self.ratio[0]:
            w, h = W, int(round(W / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            h, w = H, int(round(H * self.ratio[1]))
        else:
            h, w = H, W
        return (H - h) // 2, (W - w) // 2, h, w

    def __call__(self, x):
        x = np.asarray(x)
        axes = _hw_axes(x, self.layout, "RandomResizedCrop")
        top, left, h, w = self.params(x.shape[axes[0]], x.shape[axes[1]], self.rng())
        return resize(_crop(x, top, left, h, w, axes), self.size, self.layout)
