"""ONNX ``Resize`` run with LeZero: nearest, linear and cubic interpolation of any axes.

Resizing is separable, so it runs one axis at a time.  For each resized axis the output
coordinates are mapped back to source coordinates (``coordinate_transformation_mode``),
then to source taps and weights: ``nearest`` picks one tap (``nearest_mode``) and gathers
it; ``linear`` and ``cubic`` (optionally ``antialias``-ed when shrinking, and with
``exclude_outside``) become a dense (out, in) weight matrix applied with a matmul.  Taps
outside the input repeat its edge; ``tf_crop_and_resize`` writes ``extrapolation_value``
where the source coordinate falls outside.  Gathers and matmuls come from
``lezero.functions``, so gradients reach the input.  Integer inputs run in NumPy (float64,
rounded and saturated back), as ONNX's reference does.
"""
import math

import numpy as np

import lezero.functions as F
from lezero.onnx.import_ops import arr, ints, is_var, op

_MODES = ("nearest", "linear", "cubic")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _choice(node, name, default, allowed):
    value = node.attrs.get(name, default)
    if value not in allowed:
        raise ValueError(f"Resize: attribute {name}={value!r} is not supported (one of "
                         f"{', '.join(allowed)})")
    return value


def _settings(node, module):
    """The attributes, checked; opset 10's Resize is asymmetric with floor rounding."""
    old = module.opset < 11
    s = {"mode": _choice(node, "mode", "nearest", _MODES),
         "transform": "asymmetric" if old else _choice(
             node, "coordinate_transformation_mode", "half_pixel", _TRANSFORMS),
         "nearest": "floor" if old else _choice(node, "nearest_mode", "round_prefer_floor",
                                                _NEAREST),
         "policy": _choice(node, "keep_aspect_ratio_policy", "stretch", _POLICIES),
         "a": float(node.attrs.get("cubic_coeff_a", -0.75)),
         "exclude": bool(node.attrs.get("exclude_outside", 0)),
         "antialias": bool(node.attrs.get("antialias", 0)),
         "extrapolation": float(node.attrs.get("extrapolation_value", 0.0))}
    if s["antialias"] and s["mode"] == "nearest":
        raise ValueError("Resize: antialias is not supported with mode='nearest'")
    return s


def _inputs(node, args, module, shape):
    """(axes, scale per axis, output size per axis, roi (start, end) per axis)."""
    rank = len(shape)
    if module.opset < 11:
        roi, scales, sizes = None, args[1], None
    else:
        roi, scales, sizes = (args[k] if len(args) > k else None for k in (1, 2, 3))
    axes = [a % rank for a in node.attrs.get("axes", range(rank))]
    roi = None if roi is None or arr(roi).size == 0 else arr(roi).astype(np.float64)
    roi = [(0.0, 1.0) if roi is None else (roi[k], roi[k + len(axes)])
           for k in range(len(axes))]
    if sizes is not None and arr(sizes).size:
        out = ints(sizes)
        factors = [o / shape[a] for o, a in zip(out, axes)]
        policy = node.attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            common = min(factors) if policy == "not_larger" else max(factors)
            factors = [common] * len(axes)
            out = [int(common * shape[a] + 0.5) for a in axes]
    elif scales is not None and arr(scales).size:
        factors = [float(v) for v in arr(scales).reshape(-1)]
        out = [int(f * shape[a]) for f, a in zip(factors, axes)]
    else:
        raise ValueError("Resize needs scales or sizes")
    if not (len(factors) == len(out) == len(axes)):
        raise ValueError(f"Resize: {len(factors)} scales/sizes for {len(axes)} axes")
    if any(f <= 0 for f in factors):
        raise ValueError(f"Resize: scales must be positive, got {factors}")
    return axes, factors, out, roi


def _source(transform, out_len, in_len, scale, roi):
    """Source coordinate of every output position, and where it lies outside (or None)."""
    y = np.arange(out_len, dtype=np.float64)
    width = scale * in_len                       # the fractional output width
    if transform == "align_corners":
        return (np.zeros(out_len) if width == 1 else y * (in_len - 1) / (width - 1)), None
    if transform == "asymmetric":
        return y / scale, None
    if transform == "pytorch_half_pixel":
        return (np.full(out_len, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if transform == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if transform == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / width)
        return offset + (y + 0.5) / scale - 0.5, None
    start, end = roi                             # tf_crop_and_resize
    if width == 1:
        x = np.full(out_len, (end - start) * (in_len - 1) / 2)
    else:
        x = y * (end - start) * (in_len - 1) / (width - 1)
    x = x + start * (in_len - 1)
    return x, (x < 0) | (x > in_len - 1)


def _kernel(mode, a, t):
    t = np.abs(t)
    if mode == "linear":
        return np.clip(1 - t, 0, None)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _weights(s, x, in_len, scale):
    """The (out, in) interpolation matrix of a linear or cubic resize along one axis."""
    base = np.ceil(x).astype(np.int64) - 1       # taps start left of x; ratio in (0, 1]
    ratio = x - base
    radius = 1 if s["mode"] == "linear" else 2
    shrink = min(scale, 1.0) if s["antialias"] else 1.0
    start = math.floor(-radius / shrink) + 1
    offsets = np.arange(start, 2 - start)
    coeffs = _kernel(s["mode"], s["a"], (offsets[None, :] - ratio[:, None]) * shrink)
    if s["antialias"]:
        coeffs = coeffs / coeffs.sum(axis=1, keepdims=True)
    taps = base[:, None] + offsets[None, :]
    if s["exclude"]:
        coeffs = np.where((taps < 0) | (taps >= in_len), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    w = np.zeros((len(x), in_len))
    rows = np.broadcast_to(np.arange(len(x))[:, None], taps.shape)
    np.add.at(w, (rows, np.clip(taps, 0, in_len - 1)), coeffs)
    return w


def _nearest_index(mode, x, in_len):
    base = np.ceil(x).astype(np.int64) - 1
    ratio = x - base
    right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
             "floor": ratio == 1, "ceil": np.ones(len(x), bool)}[mode]
    return np.clip(np.where(right | (ratio == 1), base + 1, base), 0, in_len - 1)


def _resize_axis(x, axis, s, out_len, scale, roi):
    in_len = arr(x).shape[axis]
    src, outside = _source(s["transform"], out_len, in_len, scale, roi)
    if s["mode"] == "nearest":
        idx = _nearest_index(s["nearest"], src, in_len)
        y = F.take(x, idx, axis=axis) if is_var(x) else np.take(x, idx, axis=axis)
    else:
        w = _weights(s, src, in_len, scale).astype(arr(x).dtype)
        if is_var(x):
            y = F.moveaxis(F.matmul(F.moveaxis(x, axis, -1), w.T), -1, axis)
        else:
            y = np.moveaxis(np.moveaxis(x, axis, -1) @ w.T, -1, axis)
    if outside is not None and outside.any():
        shape = [1] * arr(x).ndim
        shape[axis] = out_len
        fill = np.full((), s["extrapolation"], dtype=arr(y).dtype)
        y = (F.where if is_var(y) else np.where)(outside.reshape(shape), fill, y)
    return y


@op("Resize")
def _resize(node, args, module):
    x = args[0]
    s = _settings(node, module)
    dtype = arr(x).dtype
    if dtype.kind not in "fiu":
        raise ValueError(f"Resize: input dtype {dtype} is not supported")
    axes, factors, sizes, roi = _inputs(node, args, module, arr(x).shape)
    integer = dtype.kind in "iu" and s["mode"] != "nearest"
    y = arr(x).astype(np.float64) if integer else x
    for axis, scale, size, box in zip(axes, factors, sizes, roi):
        same = math.isclose(scale, 1.0) and size == arr(y).shape[axis] and (
            s["transform"] != "tf_crop_and_resize" or box == (0.0, 1.0))
        if not same:
            y = _resize_axis(y, axis, s, size, scale, box)
    if integer:
        info = np.iinfo(dtype)
        return np.clip(np.round(y), info.min, info.max).astype(dtype)
    return y
