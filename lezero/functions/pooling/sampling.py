"""``grid_sample``: read a 4-D input at the (x, y) positions a sampling grid gives
(``torch.nn.functional.grid_sample``), the sampler of spatial transformer networks.

``grid[n, h, w] = (x, y)`` in [-1, 1] addresses ``input[n, :]``: -1 is the left/top edge
and +1 the right/bottom one, measured at the corner pixels' centres with
``align_corners=True`` and at the image's outer edges otherwise.  The computation:

1. the normalised coordinates become pixel coordinates (an affine map of ``grid``);
2. ``padding_mode`` folds coordinates that leave the image back in: ``"border"`` clips
   them to the edge, ``"reflection"`` mirrors them at the edges (then clips), and
   ``"zeros"`` leaves them, so that outside pixels read as zero;
3. ``"bilinear"`` mixes the four neighbouring pixels with weights linear in the
   coordinates; ``"nearest"`` reads the nearest pixel (round half to even, as PyTorch).

Everything is built from differentiable LeZero operators (the pixel indices are
constants: floors and roundings have zero derivative), so the gradient reaches both the
input and the grid (bilinear; for nearest the grid's gradient is zero, as in PyTorch),
and the gradient can be differentiated again.
"""
import numpy as np

from lezero.functions.common import as_variable, xp_of
from lezero.functions.math import clip
from lezero.functions.registry import register
from lezero.functions.shape import get_item, transpose
from lezero.utils.checks import check_bool, check_choice, check_float_array

__all__ = ["grid_sample"]

_MODES = ("bilinear", "nearest")
_PADDING = ("zeros", "border", "reflection")


def _reflect(c, low2, high2):
    """PyTorch's reflection of pixel coordinates ``c`` (an array) into
    [low2 / 2, high2 / 2]: returns ``(sign, offset)`` with ``reflected = sign * c + offset``,
    an affine piece of the mirror map, so its derivative is carried by ``sign``."""
    xp = xp_of(c)
    if low2 == high2:
        return xp.zeros_like(c), xp.zeros_like(c)
    low, span = low2 / 2, (high2 - low2) / 2
    d = c - low
    s1 = xp.where(d < 0, -1.0, 1.0).astype(c.dtype)
    a = xp.abs(d)
    flips = xp.floor(a / span)
    extra = a - flips * span           # fmod for non-negative a
    even = (flips % 2) == 0
    r = xp.where(even, extra + low, span - extra + low)
    sign = xp.where(even, s1, -s1).astype(c.dtype)
    return sign, (r - sign * c).astype(c.dtype)


def _pixel_coords(g, size, padding_mode, align_corners):
    """Normalised coordinates ``g`` (a Variable) as pixel coordinates along an axis of
    ``size`` pixels, folded in by ``padding_mode``."""
    if align_corners:
        c = (g + 1) * ((size - 1) / 2)
    else:
        c = ((g + 1) * size - 1) / 2
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        sign, offset = _reflect(c.data, *twice)
        c = c * as_variable(sign) + as_variable(offset)
    if padding_mode in ("border", "reflection"):
        c = clip(c, 0, size - 1)
    return c


def _read(x, iy, ix, height, width):
    """``x[n, :, iy, ix]`` as (N, Ho, Wo, C) and the mask of in-range positions."""
    xp = xp_of(x)
    inside = (iy >= 0) & (iy < height) & (ix >= 0) & (ix < width)
    n = xp.arange(x.shape[0]).reshape(-1, 1, 1)
    index = (n, slice(None), xp.clip(iy, 0, height - 1), xp.clip(ix, 0, width - 1))
    mask = inside[..., None].astype(x.dtype)
    return get_item(x, index), mask


def _bilinear(x, cx, cy):
    xp = xp_of(x)
    height, width = x.shape[2:]
    x0 = xp.floor(cx.data).astype(np.int64)
    y0 = xp.floor(cy.data).astype(np.int64)
    wx1 = (cx - as_variable(x0.astype(cx.dtype)))[..., None]
    wy1 = (cy - as_variable(y0.astype(cy.dtype)))[..., None]
    wx0, wy0 = 1 - wx1, 1 - wy1
    out = None
    for dy, wy in ((0, wy0), (1, wy1)):
        for dx, wx in ((0, wx0), (1, wx1)):
            value, mask = _read(x, y0 + dy, x0 + dx, height, width)
            term = value * (wy * wx * as_variable(mask))
            out = term if out is None else out + term
    return out


def _nearest(x, cx, cy):
    xp = xp_of(x)
    ix = xp.rint(cx.data).astype(np.int64)
    iy = xp.rint(cy.data).astype(np.int64)
    value, mask = _read(x, iy, ix, *x.shape[2:])
    return value * as_variable(mask)


def _check(input, grid, mode, padding_mode, align_corners):
    op = "grid_sample"
    arr = check_float_array(op, "input", input)
    g = check_float_array(op, "grid", grid)
    check_choice(op, "mode", mode, _MODES)
    check_choice(op, "padding_mode", padding_mode, _PADDING)
    check_bool(op, "align_corners", align_corners)
    if arr.ndim != 4:
        raise ValueError(f"{op}: input must be 4-D (N, C, H, W), got shape {arr.shape}")
    if g.ndim != 4 or g.shape[-1] != 2 or g.shape[0] != arr.shape[0]:
        raise ValueError(f"{op}: grid must have shape (N, H_out, W_out, 2) with N = "
                         f"{arr.shape[0]} (input shape {arr.shape}), got {g.shape}")
    if g.dtype != arr.dtype:
        raise TypeError(f"{op}: grid dtype {g.dtype} differs from input dtype {arr.dtype}")
    if 0 in arr.shape[2:]:
        raise ValueError(f"{op}: input has an empty spatial size, shape {arr.shape}")


@register("pooling", notes="bilinear, nearest; 4-D input")
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Sample ``input`` (N, C, H, W) at ``grid`` (N, H_out, W_out, 2) positions, as
    ``torch.nn.functional.grid_sample``; returns (N, C, H_out, W_out).

    ``mode`` is "bilinear" or "nearest" ("bicubic" is not provided); ``padding_mode`` is
    "zeros", "border" or "reflection".  ``align_corners`` defaults to False, as in
    PyTorch (which warns when it is left out; LeZero does not).  Gradients reach
    ``input`` and ``grid`` (bilinear).
    """
    _check(input, grid, mode, padding_mode, align_corners)
    input, grid = as_variable(input), as_variable(grid)
    height, width = input.shape[2:]
    cx = _pixel_coords(grid[..., 0], width, padding_mode, align_corners)
    cy = _pixel_coords(grid[..., 1], height, padding_mode, align_corners)
    out = (_bilinear if mode == "bilinear" else _nearest)(input, cx, cy)
    return transpose(out, (0, 3, 1, 2))
