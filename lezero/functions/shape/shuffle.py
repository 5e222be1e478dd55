"""Shuffles between channels and space: pixel_shuffle, pixel_unshuffle (sub-pixel
convolution's rearrangement) and channel_shuffle (ShuffleNet's).

Each is a reshape, a transpose and a reshape, so its gradient is the inverse moves and it
differentiates to any order.  (The registry files pixel_shuffle and pixel_unshuffle under
"pooling", next to interpolate, as ARCHITECTURE.md lists them.)
"""
from lezero.functions.registry import register
from lezero.functions.shape.views import reshape, transpose
from lezero.utils.checks import check_float_array, check_int

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]


def _factor(op, name, r):
    """A positive int (an upscale factor, a number of groups)."""
    r = check_int(op, name, r)
    if r < 1:
        raise ValueError(f"{op}: {name} must be positive, got {r}")
    return r


@register("pooling")
def pixel_shuffle(x, upscale_factor):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): move channel blocks into space."""
    op = "pixel_shuffle"
    arr = check_float_array(op, "x", x)
    r = _factor(op, "upscale_factor", upscale_factor)
    if arr.ndim < 3 or arr.shape[-3] % (r * r):
        raise ValueError(f"{op}: expected (*, C * {r * r}, H, W) input (channels divisible by "
                         f"upscale_factor ** 2), got shape {arr.shape}")
    *lead, c, h, w = arr.shape
    y = reshape(x, (-1, c // (r * r), r, r, h, w))
    y = transpose(y, (0, 1, 4, 2, 5, 3))
    return reshape(y, tuple(lead) + (c // (r * r), h * r, w * r))


@register("pooling")
def pixel_unshuffle(x, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W): the inverse of ``pixel_shuffle``."""
    op = "pixel_unshuffle"
    arr = check_float_array(op, "x", x)
    r = _factor(op, "downscale_factor", downscale_factor)
    if arr.ndim < 3 or arr.shape[-1] % r or arr.shape[-2] % r:
        raise ValueError(f"{op}: expected (*, C, H, W) input with H and W divisible by {r}, "
                         f"got shape {arr.shape}")
    *lead, c, h, w = arr.shape
    y = reshape(x, (-1, c, h // r, r, w // r, r))
    y = transpose(y, (0, 1, 3, 5, 2, 4))
    return reshape(y, tuple(lead) + (c * r * r, h // r, w // r))


@register("shape")
def channel_shuffle(input, groups):
    """(N, C, *) with C = g * k -> the channels reordered as the transpose of a (g, k) grid
    (ShuffleNet): output channel ``i * g + j`` is input channel ``j * k + i``."""
    op = "channel_shuffle"
    arr = check_float_array(op, "input", input)
    g = _factor(op, "groups", groups)
    if arr.ndim < 3:
        raise ValueError(f"{op}: expected (N, C, *) input with at least 3 dims, got shape "
                         f"{arr.shape}")
    n, c, *rest = arr.shape
    if c % g:
        raise ValueError(f"{op}: the {c} channels are not divisible by groups={g} (input "
                         f"shape {arr.shape})")
    y = reshape(input, (n, g, c // g, *rest))
    y = transpose(y, (0, 2, 1) + tuple(range(3, y.ndim)))
    return reshape(y, arr.shape)
