"""ONNX shape, indexing and data-movement operators run with LeZero (see import_ops)."""
import numpy as np

import lezero.functions as F
from lezero.onnx.import_checks import bounded
from lezero.onnx.import_ops import arr, ints, is_var, op

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


@op("Identity", "Dropout")
def _identity(node, args, module):
    if node.op == "Dropout" and len(args) > 2 and args[2] is not None and bool(arr(args[2])):
        raise ValueError("Dropout in training mode (training_mode=True) is not supported")
    x = args[0]
    if node.op == "Dropout" and len(node.outputs) > 1:
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
        if x.dtype == dtype:
            return x
        if x.dtype.kind == "f" and dtype.kind == "f":
            return x * np.ones((), dtype=dtype) if dtype.itemsize >= x.dtype.itemsize \
                else arr(x).astype(dtype)
        return arr(x).astype(dtype)
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
    start, limit, delta = (arr(a) for a in args)
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
    x = args[0]
    axis = node.attrs.get("axis", 1) % max(arr(x).ndim, 1)
    shape = (int(np.prod(arr(x).shape[:axis])), -1)
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
    return F.gather(data, axis, arr(idx).astype(np.int64))


@op("ScatterElements")
def _scatter_elements(node, args, module):
    data, idx, src = args
    if node.attrs.get("reduction", "none") != "add":
        raise ValueError("ScatterElements is supported with reduction='add'")
    return F.scatter_add(data, node.attrs.get("axis", 0), arr(idx).astype(np.int64), src)


@op("Pad")
def _pad(node, args, module):
    x, pads = args[0], ints(args[1]) if len(args) > 1 else node.attrs["pads"]
    mode = node.attrs.get("mode", "constant")
    if mode != "constant":
        raise ValueError(f"Pad mode {mode!r} is not supported (only 'constant')")
    value = float(arr(args[2])) if len(args) > 2 and args[2] is not None else 0.0
    ndim = arr(x).ndim
    axes = ints(args[3]) if len(args) > 3 and args[3] is not None else list(range(ndim))
    widths = [(0, 0)] * ndim
    for k, a in enumerate(axes):
        widths[a % ndim] = (pads[k], pads[k + len(axes)])
    bounded(node, tuple(max(n + lo + hi, 0) for n, (lo, hi) in zip(arr(x).shape, widths)))
    if is_var(x):
        return F.pad(x, widths, constant_values=value)
    return np.pad(arr(x), widths, constant_values=value)


@op("Trilu")
def _trilu(node, args, module):
    x = args[0]
    k = int(arr(args[1])) if len(args) > 1 and args[1] is not None else 0
    upper = node.attrs.get("upper", 1)
    if is_var(x):
        return F.triu(x, k) if upper else F.tril(x, k)
    return np.triu(arr(x), k) if upper else np.tril(arr(x), k)
