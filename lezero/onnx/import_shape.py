"""ONNX shape, indexing and data-movement operators run with LeZero (see import_ops)."""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Variable
from lezero.onnx.import_checks import bounded
from lezero.onnx.import_ops import arr, as_dtype, ints, is_var, op, scalar

_DTYPES = None


def _np_dtype(code):
    """The NumPy dtype of an ONNX tensor type LeZero reads (booleans, integers, floats)."""
    from lezero.onnx._deps import onnx
    from lezero.onnx.import_checks import TENSOR_TYPES
    if code not in TENSOR_TYPES:
        raise ValueError(f"tensor type {code} is not supported (booleans, integers and floats)")
    return np.dtype(onnx().helper.tensor_dtype_to_np_dtype(code))


def _axes(node, args, k=1):
    if len(args) > k and args[k] is not None:
        return ints(args[k])
    return list(node.attrs.get("axes", []))


@op("Identity")
def _identity(node, args, module):
    return args[0]


@op("Dropout")
def _dropout(node, args, module):
    """Inference: the identity and an all-true mask.  ``training_mode`` with a ratio
    above 0 drops at random, which an imported graph cannot reproduce: refused."""
    x = args[0]
    training = len(args) > 2 and args[2] is not None and bool(scalar(args[2]))
    if training:
        ratio = float(scalar(args[1])) if len(args) > 1 and args[1] is not None else 0.5
        if ratio != 0.0:
            raise ValueError(f"Dropout in training mode (training_mode=True) "
                             f"with ratio {ratio} is not supported (random; LeZero runs "
                             "imported graphs deterministically)")
    if len(node.outputs) > 1 and node.outputs[1]:
        return x, np.ones(arr(x).shape, dtype=bool)
    return x


@op("Constant")
def _constant(node, args, module):
    a = node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return np.asarray(a[key], dtype=dtype)
    raise ValueError(f"Constant with attributes {sorted(a)} is not supported")


@op("Cast")
def _cast(node, args, module):
    x, dtype = args[0], _np_dtype(node.attrs["to"])
    if is_var(x):
        if x.dtype.kind == "f" and dtype.kind == "f":
            return as_dtype(x, dtype)           # differentiable, narrowing too
        return x if x.dtype == dtype else arr(x).astype(dtype)
    return np.asarray(x).astype(dtype)


@op("Shape")
def _shape(node, args, module):
    shape = np.asarray(arr(args[0]).shape, dtype=np.int64)
    start, end = node.attrs.get("start", 0), node.attrs.get("end")
    return shape[start:end]


@op("Size")
def _size(node, args, module):
    return np.asarray(arr(args[0]).size, dtype=np.int64)


@op("ConstantOfShape")
def _constant_of_shape(node, args, module):
    value = node.attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(bounded(node, tuple(ints(args[0]))), value[0], dtype=value.dtype)


@op("Range")
def _range(node, args, module):
    start, limit, delta = (np.asarray(scalar(a), dtype=arr(a).dtype) for a in args)
    if float(delta) == 0:
        raise ValueError(f"{node.where()}: Range with delta 0")
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    bounded(node, (count,))
    return np.arange(start, limit, delta, dtype=np.asarray(start).dtype)


def _target_shape(shape, x_shape, allowzero):
    """ONNX Reshape semantics: 0 copies the input dim (unless allowzero), -1 infers."""
    out = [x_shape[i] if s == 0 and not allowzero else s for i, s in enumerate(shape)]
    return tuple(out)


@op("Reshape")
def _reshape(node, args, module):
    x = args[0]
    shape = _target_shape(ints(args[1]), arr(x).shape, node.attrs.get("allowzero", 0))
    return F.reshape(x, shape) if is_var(x) else np.reshape(arr(x), shape)


@op("Flatten")
def _flatten(node, args, module):
    """To 2-D at ``axis``, which may be the rank itself (all axes in the rows)."""
    x = args[0]
    dims, axis = arr(x).shape, node.attrs.get("axis", 1)
    axis = axis + len(dims) if axis < 0 else axis
    shape = (int(np.prod(dims[:axis])), int(np.prod(dims[axis:])))
    return F.reshape(x, shape) if is_var(x) else np.reshape(arr(x), shape)


@op("Transpose")
def _transpose(node, args, module):
    x, perm = args[0], node.attrs.get("perm")
    return F.transpose(x, tuple(perm) if perm else None) if is_var(x) else np.transpose(
        arr(x), perm)


@op("Squeeze")
def _squeeze(node, args, module):
    x, axes = args[0], _axes(node, args)
    ndim = arr(x).ndim
    axes = tuple(a % ndim for a in axes) if axes else None
    return F.squeeze(x, axes) if is_var(x) else np.squeeze(arr(x), axes)


@op("Unsqueeze")
def _unsqueeze(node, args, module):
    x, axes = args[0], _axes(node, args)
    ndim = arr(x).ndim + len(axes)
    shape = list(arr(x).shape)
    for a in sorted(a % ndim for a in axes):
        shape.insert(a, 1)
    return F.reshape(x, tuple(shape)) if is_var(x) else np.reshape(arr(x), shape)


@op("Expand")
def _expand(node, args, module):
    x = args[0]
    shape = bounded(node, np.broadcast_shapes(arr(x).shape, tuple(ints(args[1]))))
    return F.broadcast_to(x, shape) if is_var(x) else np.broadcast_to(arr(x), shape).copy()


@op("Tile")
def _tile(node, args, module):
    x, reps = args[0], tuple(ints(args[1]))
    bounded(node, reps + arr(x).shape)          # as many elements as the result
    return F.tile(x, reps) if is_var(x) else np.tile(arr(x), reps)


@op("Concat")
def _concat(node, args, module):
    xs, axis = [a for a in args if a is not None], node.attrs["axis"]
    if not any(is_var(x) for x in xs):
        return np.concatenate([np.asarray(x) for x in xs], axis=axis)
    return F.concatenate(xs, axis=axis)


@op("Split")
def _split(node, args, module):
    x, axis = args[0], node.attrs.get("axis", 0)
    n = arr(x).shape[axis]
    sizes = ints(args[1]) if len(args) > 1 and args[1] is not None else node.attrs.get("split")
    if not sizes:
        parts = node.attrs.get("num_outputs", len(node.outputs))
        step = -(-n // parts)
        sizes = [min(step, n - k * step) for k in range(parts)]
    bounds = list(np.cumsum(sizes)[:-1])
    if is_var(x):
        return tuple(F.split(x, bounds, axis=axis))
    return tuple(np.split(arr(x), bounds, axis=axis))


@op("Slice")
def _slice(node, args, module):
    x = args[0]
    starts, ends = ints(args[1]), ints(args[2])
    ndim = arr(x).ndim
    axes = ints(args[3]) if len(args) > 3 and args[3] is not None else list(range(len(starts)))
    steps = ints(args[4]) if len(args) > 4 and args[4] is not None else [1] * len(starts)
    index = [slice(None)] * ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a % ndim] = slice(s, e, st)
    return x[tuple(index)] if is_var(x) else arr(x)[tuple(index)]


@op("Gather")
def _gather(node, args, module):
    data, idx = args
    axis = node.attrs.get("axis", 0)
    idx = arr(idx).astype(np.int64)
    if not is_var(data):
        return np.take(arr(data), idx, axis=axis)
    n = data.shape[axis]
    idx = np.where(idx < 0, idx + n, idx)
    if axis == 0 and data.ndim == 2:
        return F.embedding(idx, data)            # the weight gets a scatter-add gradient
    return F.take(data, idx, axis=axis)


@op("GatherElements")
def _gather_elements(node, args, module):
    data, idx = args
    axis = node.attrs.get("axis", 0)
    if not is_var(data):
        return np.take_along_axis(arr(data), arr(idx), axis=axis)
    idx = arr(idx).astype(np.int64)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)    # ONNX counts these from the end
    return F.gather(data, axis, idx)


_SCATTER_NP = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
_SCATTER_F = {"add": F.add, "mul": F.mul, "max": F.maximum, "min": F.minimum}


def _scatter_slices(data, idx, src, axis, reduction):
    """Differentiable ScatterElements with a reduction: one step per position along
    ``axis`` of ``idx``; within a step the targets are distinct, so gather, combine and
    write back is exact even when ``idx`` repeats a target across steps."""
    out = data
    for j in range(idx.shape[axis]):
        pick = tuple(slice(j, j + 1) if k == axis else slice(None) for k in range(idx.ndim))
        part = idx[pick]
        piece = F.get_item(src, pick)
        old = F.gather(out, axis, part)
        out = F.scatter(out, axis, part, _SCATTER_F[reduction](old, piece))
    return out


@op("ScatterElements", "Scatter")
def _scatter_elements(node, args, module):
    """Reductions none, add, mul, max and min; negative indices count from the end."""
    data, idx, src = args
    reduction = node.attrs.get("reduction", "none")
    if reduction not in ("none",) + tuple(_SCATTER_NP):
        raise ValueError(f"ScatterElements reduction {reduction!r} is not "
                         "supported (none, add, mul, max, min)")
    axis = node.attrs.get("axis", 0) % arr(data).ndim
    idx = arr(idx).astype(np.int64)
    idx = np.where(idx < 0, idx + arr(data).shape[axis], idx)
    if not (is_var(data) or is_var(src)):
        out, src_at = np.array(arr(data)), np.broadcast_to(arr(src), idx.shape)
        where = tuple(idx if k == axis else np.indices(idx.shape)[k] for k in range(idx.ndim))
        if reduction == "none":
            out[where] = src_at
        else:
            _SCATTER_NP[reduction].at(out, where, src_at)
        return out
    idx = cuda.get_array_module(arr(data)).asarray(idx)      # on the data's device
    if not is_var(src):
        src = Variable(cuda.get_array_module(arr(data)).asarray(arr(src)), requires_grad=False)
    if reduction == "none":
        return F.scatter(data, axis, idx, src)
    if reduction == "add":
        return F.scatter_add(data, axis, idx, src)
    return _scatter_slices(data, idx, src, axis, reduction)


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_arguments(node, args, module):
    """(pads, constant value or None, axes) from the inputs (opset >= 11) or, before
    opset 11, from the ``pads`` and ``value`` attributes."""
    if module.opset < 11:
        return list(node.attrs["pads"]), node.attrs.get("value", 0.0), None
    value = scalar(args[2]) if len(args) > 2 and args[2] is not None else 0
    axes = ints(args[3]) if len(args) > 3 and args[3] is not None else None
    return ints(args[1]), value, axes


def _pad_widths(node, pads, axes, ndim):
    axes = list(range(ndim)) if axes is None else [a % ndim for a in axes]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad got {len(pads)} pads for {len(axes)} axes "
                         f"(expected {2 * len(axes)})")
    widths = [(0, 0)] * ndim
    for k, a in enumerate(axes):
        widths[a] = (pads[k], pads[k + len(axes)])
    return widths


@op("Pad")
def _pad(node, args, module):
    """Modes constant, reflect, edge and wrap; negative pads crop (constant mode only)."""
    x = args[0]
    mode = node.attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise ValueError(f"Pad mode {mode!r} is not supported "
                         f"({', '.join(_PAD_MODES)})")
    pads, value, axes = _pad_arguments(node, args, module)
    data = arr(x)
    widths = _pad_widths(node, pads, axes, data.ndim)
    if mode != "constant" and any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError(f"Pad with negative pads is supported in mode "
                         f"'constant' only, got mode {mode!r} and pads {pads}")
    bounded(node, tuple(max(n + lo + hi, 0) for n, (lo, hi) in zip(data.shape, widths)))
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    # after growing, a negative pad drops that many elements from its end
    crop = tuple(slice(-min(lo, 0), n + g_lo + g_hi + min(hi, 0))
                 for n, (lo, hi), (g_lo, g_hi) in zip(data.shape, widths, grow))
    extra = {"constant_values": np.asarray(value).astype(data.dtype).item()} \
        if mode == "constant" else {}
    if is_var(x):
        out = F.pad(x, grow, mode=mode, **extra)
        return F.get_item(out, crop) if any(lo < 0 or hi < 0 for lo, hi in widths) else out
    return np.pad(data, grow, mode=mode, **extra)[crop]


@op("Trilu")
def _trilu(node, args, module):
    x = args[0]
    k = int(arr(args[1])) if len(args) > 1 and args[1] is not None else 0
    upper = node.attrs.get("upper", 1)
    if is_var(x):
        return F.triu(x, k) if upper else F.tril(x, k)
    return np.triu(arr(x), k) if upper else np.tril(arr(x), k)
