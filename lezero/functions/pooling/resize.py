"""Resizing: ``interpolate`` (nearest, nearest-exact, (bi/tri)linear, area).

Interpolation is separable: each spatial axis is resampled in turn by gathering input
rows (``get_item``) and, for the linear modes, mixing two neighbours with constant
weights.  Everything is built from differentiable operators, so gradients (and their
gradients) follow without a hand-written backward.  Source positions follow PyTorch's
rules (``align_corners``, ``scale_factor`` used as given unless
``recompute_scale_factor``), including its float32 arithmetic for nearest neighbours.
"""
import math

import numpy as np

from lezero.functions.common import as_variable, xp_of
from lezero.functions.math import add, mul
from lezero.functions.pooling.adaptive import adaptive_avg_pool1d, adaptive_avg_pool2d
from lezero.functions.registry import register
from lezero.functions.shape import get_item
from lezero.utils.checks import check_float_array

__all__ = ["interpolate"]

_LINEAR = {3: "linear", 4: "bilinear", 5: "trilinear"}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


# The largest output ``interpolate`` builds (N * C * spatial elements): 2**31 - 1, 8 GiB of
# float32.  A scale_factor of 1e9 would otherwise ask for more memory than any machine has.
MAX_OUTPUT_ELEMENTS = 2 ** 31 - 1


def _per_axis(op, name, value, n, kind, what):
    """A number or a sequence of ``n`` numbers -> a tuple of n values of ``kind``
    (TypeError for another kind, ValueError for another length)."""
    seq = isinstance(value, (tuple, list))
    items = tuple(value) if seq else (value,) * n
    if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, kind) for v in items):
        raise TypeError(f"{op}: {name} must be {what} or a sequence of {n}, got {value!r}")
    if len(items) != n:
        raise ValueError(f"{op}: {name} must give one value per spatial dim ({n}), got "
                         f"{value!r}")
    return items


def _output_size(op, arr, size, scale_factor, recompute):
    """The checked output spatial size and the scales the resampling uses (None: from the
    sizes): exactly one of ``size`` / ``scale_factor``, positive finite values, and an
    output of at most ``MAX_OUTPUT_ELEMENTS``."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor, got size={size!r}"
                         f", scale_factor={scale_factor!r}")
    if recompute is not None and not isinstance(recompute, (bool, np.bool_)):
        raise TypeError(f"{op}: recompute_scale_factor must be None or a bool, got "
                        f"{type(recompute).__name__}")
    n, in_size = arr.ndim - 2, arr.shape[2:]
    if size is not None:
        out = tuple(int(o) for o in _per_axis(op, "size", size, n, (int, np.integer),
                                              "an int"))
        if min(out) < 1:
            raise ValueError(f"{op}: size must be positive, got {size!r}")
        return _bounded(op, arr, out), (None,) * n
    scales = tuple(float(v) for v in _per_axis(op, "scale_factor", scale_factor, n,
                                               (int, float, np.number), "a number"))
    if not all(math.isfinite(v) and v > 0 for v in scales):
        raise ValueError(f"{op}: scale_factor must be positive and finite, got "
                         f"{scale_factor!r}")
    wide = [float(i) * v for i, v in zip(in_size, scales)]
    if not all(w <= MAX_OUTPUT_ELEMENTS for w in wide):     # before int(): no huge ints
        raise ValueError(f"{op}: scale_factor {scale_factor!r} makes an output larger than "
                         f"MAX_OUTPUT_ELEMENTS = {MAX_OUTPUT_ELEMENTS} from spatial size "
                         f"{in_size}")
    out = tuple(int(math.floor(w)) for w in wide)
    if min(out) < 1:
        raise ValueError(f"{op}: output size {out} must be positive (input spatial size "
                         f"{in_size}, scale_factor {scale_factor!r})")
    return _bounded(op, arr, out), ((None,) * n if recompute else scales)


def _bounded(op, arr, out):
    total = math.prod(arr.shape[:2]) * math.prod(out)
    if total > MAX_OUTPUT_ELEMENTS:
        raise ValueError(f"{op}: the output would have {total} elements (shape "
                         f"{arr.shape[:2] + out}), more than MAX_OUTPUT_ELEMENTS = "
                         f"{MAX_OUTPUT_ELEMENTS}")
    return out


def _source_scale(in_size, out_size, align_corners, scale):
    """PyTorch's ratio from output to input coordinates along one axis."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale else in_size / out_size


def _nearest_index(in_size, out_size, scale, exact):
    """Source index of each output position; float32 products as PyTorch's CPU kernel."""
    if in_size == out_size:
        return np.arange(out_size)
    s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float32) + np.float32(0.5 if exact else 0.0)
    return np.minimum(np.floor(dst * s).astype(np.int64), in_size - 1)


def _linear_taps(in_size, out_size, align_corners, scale):
    """The two source indices and their weights for each output position."""
    ratio = _source_scale(in_size, out_size, align_corners, scale)
    dst = np.arange(out_size, dtype=np.float64)
    src = ratio * dst if align_corners else np.maximum(ratio * (dst + 0.5) - 0.5, 0.0)
    i0 = np.minimum(src.astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w1 = np.clip(src - i0, 0.0, 1.0)
    return i0, i1, 1.0 - w1, w1


def _take(x, axis, index):
    return get_item(x, (slice(None),) * axis + (index,))


def _resample_axis(x, axis, out_size, mode, align_corners, scale):
    """Resample one spatial axis of ``x`` to ``out_size``."""
    in_size = x.shape[axis]
    xp = xp_of(x)
    if mode in ("nearest", "nearest-exact"):
        if in_size == out_size:
            return x
        return _take(x, axis, xp.asarray(_nearest_index(in_size, out_size, scale,
                                                        mode == "nearest-exact")))
    i0, i1, w0, w1 = _linear_taps(in_size, out_size, align_corners, scale)
    shape = (out_size,) + (1,) * (x.ndim - axis - 1)

    def weight(w):
        return as_variable(xp.asarray(w.reshape(shape), dtype=x.dtype))
    return add(mul(_take(x, axis, xp.asarray(i0)), weight(w0)),
               mul(_take(x, axis, xp.asarray(i1)), weight(w1)))


@register("pooling")
def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W) input.

    Give exactly one of ``size`` and ``scale_factor``.  ``mode`` is "nearest",
    "nearest-exact", "linear" (3-D), "bilinear" (4-D), "trilinear" (5-D) or "area"
    (adaptive average pooling; 3-D and 4-D).
    """
    op = "interpolate"
    arr = check_float_array(op, "x", x)
    if arr.ndim not in (3, 4, 5):
        raise ValueError(f"{op}: expected a 3-D, 4-D or 5-D (N, C, ...) input, got shape "
                         f"{arr.shape}")
    if not isinstance(mode, str):
        raise TypeError(f"{op}: mode must be a str, one of {_MODES}, got "
                        f"{type(mode).__name__}")
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    linear = mode in _LINEAR.values()
    if linear and mode != _LINEAR[arr.ndim]:
        raise ValueError(f"{op}: mode {mode!r} needs a {list(_LINEAR.values()).index(mode) + 3}"
                         f"-D input, got shape {arr.shape}")
    if align_corners is not None and not isinstance(align_corners, (bool, np.bool_)):
        raise TypeError(f"{op}: align_corners must be None or a bool, got "
                        f"{type(align_corners).__name__}")
    if align_corners is not None and not linear:
        raise ValueError(f"{op}: align_corners can only be set with the linear modes, got "
                         f"mode {mode!r}")
    if antialias:
        raise ValueError(f"{op}: antialias=True is not supported")
    out, scales = _output_size(op, arr, size, scale_factor, recompute_scale_factor)
    n = arr.ndim - 2
    if mode == "area":
        if n == 3:
            raise ValueError(f"{op}: mode 'area' supports 3-D and 4-D input, got shape "
                             f"{arr.shape}")
        return (adaptive_avg_pool1d if n == 1 else adaptive_avg_pool2d)(x, out)
    y = x
    for axis, (o, s) in enumerate(zip(out, scales), start=2):
        y = _resample_axis(y, axis, o, mode, bool(align_corners), s)
    return y
