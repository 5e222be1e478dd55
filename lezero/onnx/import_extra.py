"""Smaller ONNX operators run with LeZero (see import_ops): CumProd, the bitwise
operators, Hardmax, TopK, LpNormalization, OneHot, Compress, SpaceToDepth /
DepthToSpace, Swish, ThresholdedRelu, EyeLike, GatherND, ReverseSequence,
GroupNormalization, CenterCropPad, GridSample and the Hann / Hamming / Blackman windows.

What reaches a float Variable stays differentiable (``lezero.functions``); index
results (TopK's indices, OneHot, Hardmax, EyeLike, windows) are NumPy constants.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core.config import get_config
from lezero.onnx.import_checks import bounded
from lezero.onnx.import_ops import arr, as_dtype, ints, is_var, op, scalar


def _take(x, idx, axis):
    """``x`` at integer ``idx`` along ``axis`` (a gather; differentiable for Variables)."""
    return F.take(x, idx, axis=axis) if is_var(x) else np.take(arr(x), idx, axis=axis)


@op("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
def _bitwise(node, args, module):
    fn = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
          "BitwiseXor": np.bitwise_xor, "BitwiseNot": np.invert}[node.op]
    return fn(*[arr(a) for a in args])


@op("Hardmax")
def _hardmax(node, args, module):
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    data, axis = arr(args[0]), node.attrs.get("axis", -1)
    first = np.expand_dims(np.argmax(data, axis=axis), axis)
    out = np.zeros_like(data)
    np.put_along_axis(out, first, 1, axis=axis)
    return out


def _order_key(data, largest):
    """A key whose ascending stable sort lists ``data`` largest (or smallest) first and
    equal values by index, as ONNX's TopK wants."""
    if not largest:
        return data
    return np.invert(data) if data.dtype.kind in "iu" else -data


@op("TopK")
def _topk(node, args, module):
    x, k = args[0], int(scalar(args[1]))
    axis = node.attrs.get("axis", -1) % arr(x).ndim
    data = cuda.as_numpy(arr(x))          # the order is index work: on the host
    order = np.argsort(_order_key(data, node.attrs.get("largest", 1)), axis=axis,
                       kind="stable")
    idx = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    if is_var(x):
        return F.gather(x, axis, idx), idx
    return np.take_along_axis(data, idx, axis=axis), idx


@op("LpNormalization")
def _lp_normalization(node, args, module):
    """``x`` over its L1 or L2 norm along ``axis``; an all-zero slice stays zero."""
    x, axis, p = args[0], node.attrs.get("axis", -1), node.attrs.get("p", 2)
    if p not in (1, 2):
        raise ValueError(f"LpNormalization p={p} is not supported (1 or 2)")
    if not is_var(x):
        data = arr(x)
        norm = np.sum(np.abs(data), axis, keepdims=True) if p == 1 else \
            np.sqrt(np.sum(data * data, axis, keepdims=True))
        return (data / (norm + (norm == 0))).astype(data.dtype)
    total = F.sum(F.abs(x) if p == 1 else x * x, axis=axis, keepdims=True)
    total = total + (arr(total) == 0).astype(arr(total).dtype)     # no 0/0, no sqrt'(0)
    return x / (total if p == 1 else F.sqrt(total))


@op("OneHot")
def _one_hot(node, args, module):
    """``values[1]`` where the class is the index (negative ones count from ``depth``),
    ``values[0]`` elsewhere; out-of-range indices give a row of ``values[0]``."""
    idx, depth = cuda.as_numpy(arr(args[0])), int(scalar(args[1]))
    values = cuda.as_numpy(arr(args[2])).reshape(-1)
    axis = node.attrs.get("axis", -1)
    axis = axis + idx.ndim + 1 if axis < 0 else axis
    idx = np.where(idx < 0, idx + depth, idx).astype(np.int64)
    shape = [1] * (idx.ndim + 1)
    shape[axis] = depth
    classes = np.arange(depth).reshape(shape)
    hot = np.expand_dims(idx, axis) == classes
    bounded(node, hot.shape)
    return np.where(hot, values[1], values[0]).astype(values.dtype)


@op("Compress")
def _compress(node, args, module):
    x, cond = args[0], arr(args[1]).astype(bool).reshape(-1)
    axis = node.attrs.get("axis")
    if axis is None:
        x, axis = (F.reshape(x, (-1,)) if is_var(x) else arr(x).reshape(-1)), 0
    n = arr(x).shape[axis]
    keep = np.nonzero(cond[:n])[0]
    return _take(x, keep, axis)


def _blocks_shape(node, x):
    b = int(node.attrs["blocksize"])
    n, c, hgt, wid = arr(x).shape
    return b, n, c, hgt, wid


def _rearrange(x, shape, perm, out):
    if is_var(x):
        return F.reshape(F.transpose(F.reshape(x, shape), perm), out)
    return np.reshape(np.transpose(np.reshape(arr(x), shape), perm), out)


@op("SpaceToDepth")
def _space_to_depth(node, args, module):
    b, n, c, hgt, wid = _blocks_shape(node, args[0])
    perm = (0, 3, 5, 1, 2, 4) if node.attrs.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    return _rearrange(args[0], (n, c, hgt // b, b, wid // b, b), perm,
                      (n, c * b * b, hgt // b, wid // b))


@op("DepthToSpace")
def _depth_to_space(node, args, module):
    b, n, c, hgt, wid = _blocks_shape(node, args[0])
    if node.attrs.get("mode", "DCR") == "DCR":
        shape, perm = (n, b, b, c // (b * b), hgt, wid), (0, 3, 4, 1, 5, 2)
    else:
        shape, perm = (n, c // (b * b), b, b, hgt, wid), (0, 1, 4, 2, 5, 3)
    return _rearrange(args[0], shape, perm, (n, c // (b * b), hgt * b, wid * b))


@op("Swish")
def _swish(node, args, module):
    x = args[0]
    return x * F.sigmoid(x * node.attrs.get("alpha", 1.0))


@op("ThresholdedRelu")
def _thresholded_relu(node, args, module):
    x = args[0]
    return F.where(arr(x) > node.attrs.get("alpha", 1.0), x, x * 0)


@op("EyeLike")
def _eye_like(node, args, module):
    from lezero.onnx.import_shape import _np_dtype
    shape = arr(args[0]).shape
    dtype = _np_dtype(node.attrs["dtype"]) if "dtype" in node.attrs else arr(args[0]).dtype
    return np.eye(shape[0], shape[1], k=node.attrs.get("k", 0), dtype=dtype)


@op("GatherND")
def _gather_nd(node, args, module):
    """Slices of ``data`` at the index tuples in the last axis of ``indices``, after
    ``batch_dims`` leading axes that both share."""
    data, idx = args[0], arr(args[1]).astype(np.int64)
    dims = node.attrs.get("batch_dims", 0)
    shape = arr(data).shape
    depth = idx.shape[-1]
    idx = np.where(idx < 0, idx + np.asarray(shape[dims:dims + depth]), idx)
    batch = np.indices(idx.shape[:dims]) if dims else []
    batch = [np.broadcast_to(b.reshape(b.shape + (1,) * (idx.ndim - 1 - dims)),
                             idx.shape[:-1]) for b in batch]
    where = tuple(batch) + tuple(idx[..., k] for k in range(depth))
    return data[where] if is_var(data) else arr(data)[where]


@op("ReverseSequence")
def _reverse_sequence(node, args, module):
    """Each batch entry's first ``sequence_lens[b]`` steps reversed, the rest kept."""
    x, lens = args[0], arr(args[1]).astype(np.int64)
    t_axis, b_axis = node.attrs.get("time_axis", 0), node.attrs.get("batch_axis", 1)
    steps = arr(x).shape[t_axis]
    t = np.arange(steps)[:, None]
    source = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)   # (time, batch)
    if t_axis > b_axis:
        source = source.T
    shape = [1] * arr(x).ndim
    shape[t_axis], shape[b_axis] = steps, len(lens)
    index = np.broadcast_to(source.reshape(shape), arr(x).shape)
    if is_var(x):
        return F.gather(x, t_axis, index)
    return np.take_along_axis(arr(x), index, axis=t_axis)


@op("GroupNormalization")
def _group_norm(node, args, module):
    """Per-channel scale and bias (opset 21; before it one per group)."""
    x, scale, bias = args
    groups, eps = int(node.attrs["num_groups"]), node.attrs.get("epsilon", 1e-5)
    n, c = arr(x).shape[:2]
    if module.opset < 21:
        scale, bias = (_take(v, np.repeat(np.arange(groups), c // groups), 0)
                       for v in (scale, bias))
    dtype = arr(x).dtype
    wide = as_dtype(x, np.float32) if dtype.itemsize < 4 else x
    y = F.group_norm(wide, groups, eps=eps)
    shape = (1, c) + (1,) * (arr(x).ndim - 2)
    return as_dtype(y, dtype) * F.reshape(scale, shape) + F.reshape(bias, shape)


@op("CenterCropPad")
def _center_crop_pad(node, args, module):
    """Each named axis cropped or zero-padded about its centre to the given length."""
    x, target = args[0], ints(args[1])
    ndim = arr(x).ndim
    axes = [a % ndim for a in node.attrs.get("axes", range(ndim))]
    for axis, size in zip(axes, target):
        n = arr(x).shape[axis]
        if size < n:
            start = (n - size) // 2
            x = _take(x, np.arange(start, start + size), axis)
        elif size > n:
            lo = (size - n) // 2
            widths = [(0, 0)] * ndim
            widths[axis] = (lo, size - n - lo)
            x = F.pad(x, widths) if is_var(x) else np.pad(arr(x), widths)
    return x


_WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
            "BlackmanWindow": (0.42, 0.5, 0.08)}


@op("HannWindow", "HammingWindow", "BlackmanWindow")
def _window(node, args, module):
    """``a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)``; N is the size, or size - 1 when
    not ``periodic``."""
    from lezero.onnx.import_shape import _np_dtype
    size = int(scalar(args[0]))
    bounded(node, (size,))
    a0, a1, a2 = _WINDOWS[node.op]
    period = size if node.attrs.get("periodic", 1) else size - 1
    phase = 2 * np.pi * np.arange(size) / max(period, 1)
    out = a0 - a1 * np.cos(phase) + a2 * np.cos(2 * phase)
    return out.astype(_np_dtype(node.attrs.get("output_datatype", 1)))


_GRID_MODES = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest"}
_CUBIC_A = -0.75


def _cubic_weights(t):
    """Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 for the
    fractional positions ``t`` (a new last axis of 4)."""
    a, d = _CUBIC_A, np.stack([t + 1, t, 1 - t, 2 - t], axis=-1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(np.abs(np.arange(4) - 1.5) < 1, near, far)


def _grid_reflect(v, lo, hi):
    """``v`` reflected off ``lo`` and ``hi`` until it lies between them."""
    span = hi - lo
    if span <= 0:
        return np.zeros_like(v)
    below = np.abs(v - lo)
    turns, rest = np.floor(below / span), np.mod(below, span)
    return np.where(np.mod(turns, 2) == 0, lo + rest, hi - rest)


def _grid_axis_taps(coord, size, mode, padding, align):
    """Per sampled point along one spatial axis: (tap indices, weights, valid) with a last
    axis of 1 (nearest), 2 (linear) or 4 (cubic) taps, as ONNX's reference places them."""
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if mode == "nearest":
        coord = np.rint(coord)
    out = (coord < lo) | (coord > hi)
    if padding == "border":
        coord = np.where(out, np.clip(coord, 0, size - 1), coord)
    elif padding == "reflection":
        coord = np.where(out, _grid_reflect(coord, lo, hi), coord)
    if mode == "nearest":
        taps, weights = np.trunc(coord)[..., None], np.ones(coord.shape + (1,))
    else:
        base = np.floor(coord)
        t = coord - base
        offsets = np.arange(-1, 3) if mode == "cubic" else np.arange(2)
        taps = base[..., None] + offsets
        weights = _cubic_weights(t) if mode == "cubic" else np.stack([1 - t, t], -1)
    if padding == "border":
        taps = np.clip(taps, 0, size - 1)
    elif padding == "reflection":
        taps = np.trunc(_grid_reflect(taps, lo, hi))
    valid = (taps >= 0) & (taps < size)
    return np.clip(taps, 0, size - 1).astype(np.int64), weights, valid


def _grid_gather(x, grid, mode, padding, align):
    """Sample ``x`` (N, C, *spatial) at ``grid`` (N, *out, d) by gathering every tap
    combination at once: a weighted sum, differentiable in ``x``."""
    data, g = arr(x), np.asarray(cuda.as_numpy(arr(grid)), dtype=np.float64)
    sizes, d = data.shape[2:], data.ndim - 2
    flat, weight = np.zeros(g.shape[:-1] + (1,), np.int64), np.ones(g.shape[:-1] + (1,))
    for axis, size in enumerate(sizes):
        n = g[..., d - 1 - axis]
        coord = (n + 1) / 2 * (size - 1) if align else ((n + 1) * size - 1) / 2
        taps, w, valid = _grid_axis_taps(coord, size, mode, padding, align)
        flat = (flat[..., :, None] * size + taps[..., None, :]).reshape(flat.shape[:-1] + (-1,))
        weight = (weight[..., :, None] * (w * valid)[..., None, :]).reshape(flat.shape)
    batch = np.arange(data.shape[0]).reshape((-1,) + (1,) * (flat.ndim - 1))
    xs = F.reshape(x, data.shape[:2] + (-1,)) if is_var(x) else data.reshape(
        data.shape[:2] + (-1,))
    index = (batch, slice(None), cuda.as_array(flat, data))
    picked = F.get_item(xs, index) if is_var(x) else xs[index]     # (N, *out, K, C)
    w = cuda.as_array(weight.astype(data.dtype)[..., None], data)
    total = F.sum(picked * w, axis=-2) if is_var(x) else (picked * w).sum(axis=-2)
    order = (0, total.ndim - 1) + tuple(range(1, total.ndim - 1))
    return F.transpose(total, order) if is_var(x) else total.transpose(order)


@op("GridSample")
def _grid_sample(node, args, module):
    """Sampling as PyTorch's grid_sample (modes linear/bilinear, nearest and cubic/
    bicubic; padding zeros, border, reflection) on 4-D and 5-D inputs.  Bilinear and
    nearest on 4-D run LeZero's ``grid_sample`` (differentiable in x and grid); the
    rest gathers the taps (differentiable in x only: a grid that needs a gradient there
    is an error)."""
    x, grid = args
    mode = node.attrs.get("mode", "linear" if module.opset >= 20 else "bilinear")
    padding = node.attrs.get("padding_mode", "zeros")
    align = bool(node.attrs.get("align_corners", 0))
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if mode not in ("linear", "nearest", "cubic") or arr(x).ndim not in (4, 5) or \
            padding not in ("zeros", "border", "reflection"):
        raise ValueError(f"GridSample with mode {mode!r}, padding_mode {padding!r} on a "
                         f"{arr(x).ndim}-D input is not supported (linear, nearest or cubic; "
                         "4-D or 5-D input)")
    if arr(grid).shape != arr(x).shape[:1] + arr(grid).shape[1:-1] + (arr(x).ndim - 2,):
        raise ValueError(f"GridSample: grid of shape {arr(grid).shape} does not fit input "
                         f"{arr(x).shape}")
    if mode in _GRID_MODES and arr(x).ndim == 4:
        return F.grid_sample(x, grid, mode=_GRID_MODES[mode], padding_mode=padding,
                             align_corners=align)
    if is_var(grid) and grid.requires_grad and get_config().enable_backprop:
        raise ValueError(f"GridSample {mode} on a {arr(x).ndim}-D input: gradients with "
                         "respect to the grid are not supported")
    return _grid_gather(x, grid, mode, padding, align)


@op("Det")
def _det(node, args, module):
    x = args[0]
    return F.det(x) if is_var(x) else np.linalg.det(arr(x)).astype(arr(x).dtype)


@op("Unique")
def _unique(node, args, module):
    """Y, first indices, inverse indices and counts; ``sorted=0`` keeps the order of
    first occurrence.  Y is gathered from the input, so it keeps a gradient."""
    x, axis = args[0], node.attrs.get("axis")
    data = cuda.as_numpy(arr(x))
    if axis is None:
        x, data, axis = (F.reshape(x, (-1,)) if is_var(x) else data.reshape(-1)), \
            data.reshape(-1), 0
    _, first, inverse, counts = np.unique(data, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    if not node.attrs.get("sorted", 1):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
    y = _take(x, first, axis)
    return tuple(v.astype(np.int64) if k else v for k, v in
                 enumerate((y, first, inverse.reshape(-1), counts)))


@op("NonZero")
def _non_zero(node, args, module):
    return np.array(np.nonzero(cuda.as_numpy(arr(args[0]))), dtype=np.int64)


@op("MeanVarianceNormalization")
def _mvn(node, args, module):
    """``(x - mean) / std`` over ``axes`` (default N, H, W), the variance biased."""
    x, axes = args[0], tuple(node.attrs.get("axes", [0, 2, 3]))
    centred = x - F.mean(x, axis=axes, keepdims=True)
    return centred / F.sqrt(F.mean(centred * centred, axis=axes, keepdims=True))


def _rotate_halves(x1, x2, cos, sin):
    return cos * x1 - sin * x2, sin * x1 + cos * x2


@op("RotaryEmbedding")
def _rotary_embedding(node, args, module):
    """Rotary position embedding of (B, heads, S, H) or (B, S, heads * H) inputs: the
    first ``rotary_embedding_dim`` features turn by the cached angles (pairs split in
    halves, or neighbours when ``interleaved``); position ids pick rows of the caches."""
    x, cos, sin = args[:3]
    ids = args[3] if len(args) > 3 else None
    shape = arr(x).shape
    if len(shape) == 4:
        xs = F.transpose(x, (0, 2, 1, 3))                  # (B, S, heads, H)
    else:
        heads = int(node.attrs.get("num_heads", 0))
        if not heads:
            raise ValueError("RotaryEmbedding of a 3-D input needs num_heads")
        xs = F.reshape(x, shape[:2] + (heads, shape[2] // heads))
    dim = int(node.attrs.get("rotary_embedding_dim", 0)) or xs.shape[3]
    if arr(cos).ndim != (2 if ids is not None else 3):
        raise ValueError(f"RotaryEmbedding: cos_cache of shape {arr(cos).shape}; expected "
                         "(positions, dim / 2) with position_ids, else (batch, sequence, "
                         "dim / 2)")
    if ids is not None:
        cos, sin = (_take(c, cuda.as_numpy(arr(ids)).astype(np.int64), 0) for c in (cos, sin))
    cos, sin = (F.reshape(c, c.shape[:-1] + (1, c.shape[-1])) for c in (cos, sin))
    turn = F.get_item(xs, (Ellipsis, slice(0, dim)))
    if node.attrs.get("interleaved", 0):
        real, imag = _rotate_halves(F.get_item(turn, (Ellipsis, slice(0, None, 2))),
                                    F.get_item(turn, (Ellipsis, slice(1, None, 2))), cos, sin)
        turned = F.reshape(F.stack([real, imag], axis=-1), turn.shape)
    else:
        half = dim // 2
        turned = F.concatenate(_rotate_halves(F.get_item(turn, (Ellipsis, slice(0, half))),
                                              F.get_item(turn, (Ellipsis, slice(half, dim))),
                                              cos, sin), axis=-1)
    if dim < xs.shape[3]:
        turned = F.concatenate([turned, F.get_item(xs, (Ellipsis, slice(dim, None)))], axis=-1)
    return F.reshape(turned, shape) if len(shape) == 3 else F.transpose(turned, (0, 2, 1, 3))


def _box_corners(boxes, center):
    """(y1, x1, y2, x2) with y1 <= y2 and x1 <= x2, from corner or centre boxes."""
    if center:
        x, y, w, h = boxes.T
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=1)
    return np.concatenate([np.minimum(boxes[:, :2], boxes[:, 2:]),
                           np.maximum(boxes[:, :2], boxes[:, 2:])], axis=1)


def _iou(box, others):
    inter = np.prod(np.clip(np.minimum(box[2:], others[:, 2:]) -
                            np.maximum(box[:2], others[:, :2]), 0, None), axis=1)
    area = np.prod(box[2:] - box[:2])
    areas = np.prod(others[:, 2:] - others[:, :2], axis=1)
    union = area + areas - inter
    return np.where((area > 0) & (areas > 0) & (union > 0), inter / np.where(union > 0,
                                                                             union, 1), 0)


def _nms_class(boxes, scores, limit, iou_limit, score_limit):
    """Greedy selection for one batch entry and class: highest score first (ties: the
    lower index), dropping boxes whose IoU with a kept one exceeds ``iou_limit``."""
    order = [k for k in np.argsort(-scores, kind="stable")
             if score_limit is None or scores[k] > score_limit]
    kept = []
    for k in order:
        if len(kept) >= limit:
            break
        if not kept or not (_iou(boxes[k], boxes[kept]) > iou_limit).any():
            kept.append(k)
    return kept


def _optional_scalar(args, k, default):
    return default if len(args) <= k or args[k] is None or arr(args[k]).size == 0 \
        else scalar(args[k])


@op("NonMaxSuppression")
def _non_max_suppression(node, args, module):
    boxes, scores = cuda.as_numpy(arr(args[0])), cuda.as_numpy(arr(args[1]))
    limit = int(_optional_scalar(args, 2, 0))
    iou_limit = float(_optional_scalar(args, 3, 0.0))
    score_limit = _optional_scalar(args, 4, None)
    center = node.attrs.get("center_point_box", 0)
    found = []
    for b in range(scores.shape[0]):
        corners = _box_corners(boxes[b].astype(np.float64), center)
        for c in range(scores.shape[1]):
            found += [(b, c, k) for k in _nms_class(corners, scores[b, c], limit, iou_limit,
                                                    score_limit)]
    return np.array(found, dtype=np.int64).reshape(-1, 3)


@op("Col2Im")
def _col2im(node, args, module):
    """Columns (N, C * prod(block), L) summed back into images: a grouped transposed
    convolution whose kernels pick one block offset each, then the pads cut off."""
    cols, image, block = args[0], ints(args[1]), ints(args[2])
    n = len(block)
    at = node.attrs
    strides, dilations = at.get("strides", [1] * n), at.get("dilations", [1] * n)
    pads = at.get("pads", [0] * 2 * n)
    count = int(np.prod(block))
    batch, channels = arr(cols).shape[0], arr(cols).shape[1] // count
    blocks = [(i + pads[k] + pads[k + n] - d * (b - 1) - 1) // s + 1 for k, (i, b, s, d) in
              enumerate(zip(image, block, strides, dilations))]
    x = F.reshape(cols, (batch, channels * count) + tuple(blocks))
    kernel = np.zeros((channels * count, 1) + tuple(block), dtype=arr(cols).dtype)
    for c in range(channels):
        for k in range(count):
            kernel[(c * count + k, 0) + np.unravel_index(k, block)] = 1
    kernel = cuda.get_array_module(arr(cols)).asarray(kernel)
    conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[n]
    y = conv(x, kernel, None, stride=tuple(strides), groups=channels,
             dilation=tuple(dilations))
    crop = tuple(slice(pads[k], pads[k] + image[k]) for k in range(n))
    return F.get_item(y, (slice(None), slice(None)) + crop)
