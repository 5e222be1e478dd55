"""ONNX rules for shape, indexing and joining operators (and embedding lookup)."""
import numpy as np

from lezero import cuda
from lezero.jit.ir import ValueRef
from lezero.onnx.registry import onnx_op

_BIG = np.iinfo(np.int64).max
_SMALL = np.iinfo(np.int64).min


def _x(ctx, node):
    return ctx.ins(node)[0]


def _dynamic_shape_target(ctx, node, in_name, out_name):
    """A Reshape target (tensor name) valid for both traces: a static dim is written out,
    a dim that changed copies the input dim at its position (0) when that matches in both
    traces, and at most one other dim is inferred (-1); with more, the whole target is
    read from the graph inputs' run-time shapes."""
    (in_a, in_b), (out_a, out_b) = ctx.shapes(in_name), ctx.shapes(out_name)
    target = []
    for i, (a, b) in enumerate(zip(out_a, out_b)):
        if a == b:
            target.append(a)
        elif i < len(in_a) and in_a[i] == a and in_b[i] == b:
            target.append(0)
        else:
            target.append(-1)
    if 0 in out_a:
        ctx.fail(node, "reshape to an empty dimension with dynamic axes")
    if target.count(-1) > 1:           # the target read from the graph inputs' shapes
        shape = ctx.run_time_shape(out_a, out_b)
        if shape is None:
            ctx.fail(node, f"reshape from {in_a} to {out_a} mixes several dynamic "
                     "dimensions that are not sizes of graph input axes")
        return shape
    return ctx.ints(target)


@onnx_op("Reshape", opset=5, emits=("Reshape", "Shape", "Gather", "Unsqueeze", "Concat"))
def _reshape(ctx, node):
    x = node.inputs[0]
    alias = ctx.aliases.get(x)
    if alias is not None and alias[1] == ctx.shapes(node.outputs[0]):
        ctx.claim(node, "shape")          # the packed view of a 3-D tensor: use that tensor
        ctx.emit("Identity", [alias[0]], node.outputs)
        return
    if "shape" in ctx.dynamic_attrs(node):
        ctx.claim(node, "shape")
        target = _dynamic_shape_target(ctx, node, x, node.outputs[0])
    else:
        if 0 in node.attrs["shape"]:
            ctx.fail(node, "reshape to an empty dimension")
        target = ctx.ints(list(node.attrs["shape"]))
    ctx.emit("Reshape", [ctx.name(x), target], node.outputs)


@onnx_op("Transpose", opset=1, emits=("Transpose",))
def _transpose(ctx, node):
    axes = node.attrs["axes"]
    if axes is None:
        axes = tuple(reversed(range(len(ctx.shape(node.inputs[0])))))
    ctx.emit("Transpose", [_x(ctx, node)], node.outputs, perm=ctx.int_list(axes))


@onnx_op("BroadcastTo", opset=8, emits=("Expand", "Shape", "Gather", "Unsqueeze", "Concat"))
def _broadcast_to(ctx, node):
    (in_a, in_b), (out_a, out_b) = ctx.shapes(node.inputs[0]), ctx.shapes(node.outputs[0])
    lead = len(out_a) - len(in_a)
    target = []
    for i, (a, b) in enumerate(zip(out_a, out_b)):
        if a == b:
            target.append(a)
        elif i >= lead and in_a[i - lead] == a and in_b[i - lead] == b:
            target.append(1)            # Expand keeps the input's (dynamic) size there
        else:
            target = None               # a size the input lacks: read it from an input
            break
    shape = ctx.ints(target) if target is not None else ctx.run_time_shape(out_a, out_b)
    if shape is None:
        ctx.fail(node, f"broadcast to {out_a} along a dynamic axis that neither the input "
                 "nor a graph input has")
    ctx.claim(node, "shape")
    ctx.emit("Expand", [_x(ctx, node), shape], node.outputs)


@onnx_op("SumTo", opset=13, emits=("ReduceSum", "Squeeze"))
def _sum_to(ctx, node):
    in_shape, shape = ctx.shape(node.inputs[0]), tuple(node.attrs["shape"])
    lead = len(in_shape) - len(shape)
    axes = list(range(lead)) + [lead + i for i, s in enumerate(shape)
                                if s == 1 and in_shape[lead + i] != 1]
    x = _x(ctx, node)
    if axes:
        x = ctx.emit("ReduceSum", [x, ctx.ints(axes)], keepdims=1)
    if lead:
        x = ctx.emit("Squeeze", [x, ctx.ints(list(range(lead)))])
    ctx.emit("Identity", [x], node.outputs)


def _index_items(index, ndim):
    """The index as a tuple with the Ellipsis expanded into full slices."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(i is Ellipsis for i in items):
        k = next(j for j, i in enumerate(items) if i is Ellipsis)
        used = sum(1 for i in items if i is not None and i is not Ellipsis)
        items[k:k + 1] = [slice(None)] * (ndim - used)
    return items


def _is_array_index(item):
    return isinstance(item, (ValueRef, list)) or isinstance(item, cuda.array_types())


def _gather_nd(ctx, node, items):
    """x[a0, a1, ..., :, ...]: constant integer arrays on the leading axes -> GatherND."""
    k = 0
    while k < len(items) and _is_array_index(items[k]) and not isinstance(items[k], ValueRef):
        k += 1
    if k < 2 or any(not (isinstance(i, slice) and i == slice(None)) for i in items[k:]):
        return False
    arrays = np.broadcast_arrays(*[np.asarray(cuda.as_numpy(i), dtype=np.int64)
                                   for i in items[:k]])
    idx = ctx.const(np.stack(arrays, axis=-1), "index")
    ctx.emit("GatherND", [_x(ctx, node), idx], node.outputs)
    return True


@onnx_op("GetItem", opset=13, emits=("Slice", "Gather", "GatherND", "Squeeze", "Unsqueeze"))
def _get_item(ctx, node):
    ndim = len(ctx.shape(node.inputs[0]))
    items = _index_items(node.attrs["index"], ndim)
    if _gather_nd(ctx, node, items):
        return
    starts, ends, axes, steps, squeeze, unsqueeze, gather = [], [], [], [], [], [], None
    axis, out_pos = 0, 0
    for item in items:
        if item is None:
            unsqueeze.append(out_pos)
            out_pos += 1
            continue
        if isinstance(item, slice):
            if item != slice(None):
                step = 1 if item.step is None else int(item.step)
                lo = item.start if item.start is not None else (0 if step > 0 else _BIG)
                hi = item.stop if item.stop is not None else (_BIG if step > 0 else _SMALL)
                starts, ends = starts + [int(lo)], ends + [int(hi)]
                axes, steps = axes + [axis], steps + [step]
            out_pos += 1
        elif _is_array_index(item):
            if gather is not None or squeeze or np.asarray(
                    getattr(item, "dtype", np.int64)).dtype == np.bool_:
                ctx.fail(node, "only one integer-array index (no boolean mask, no mixing "
                         "with integer indices) is exported")
            gather = (axis, item)
            out_pos += 1
        else:
            i = int(item)
            starts, ends = starts + [i], ends + [i + 1 if i != -1 else _BIG]
            axes, steps = axes + [axis], steps + [1]
            squeeze.append(axis)
        axis += 1
    _emit_index(ctx, node, starts, ends, axes, steps, gather, squeeze, unsqueeze)


def _emit_index(ctx, node, starts, ends, axes, steps, gather, squeeze, unsqueeze):
    x = _x(ctx, node)
    if axes:
        x = ctx.emit("Slice", [x, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes),
                               ctx.ints(steps)])
    if gather is not None:
        if squeeze:
            ctx.fail(node, "an array index together with integer indices")
        g_axis, item = gather
        if isinstance(item, ValueRef):
            idx = ctx.name(item.name)
        else:
            idx = ctx.const(np.asarray(cuda.as_numpy(item), dtype=np.int64), "index")
        x = ctx.emit("Gather", [x, idx], axis=int(g_axis))
    if squeeze:
        x = ctx.emit("Squeeze", [x, ctx.ints(squeeze)])
    if unsqueeze:
        x = ctx.emit("Unsqueeze", [x, ctx.ints(unsqueeze)])
    ctx.emit("Identity", [x], node.outputs)


@onnx_op("Gather", opset=11, emits=("GatherElements",))
def _gather(ctx, node):
    idx = ctx.attr_tensor(node, "index", dtype=np.int64)
    ctx.claim(node, "full")
    ctx.emit("GatherElements", [_x(ctx, node), idx], node.outputs,
             axis=int(node.attrs["axis"]))


@onnx_op("ScatterAdd", opset=16, emits=("ScatterElements",))
def _scatter_add(ctx, node):
    x, src = ctx.ins(node)
    idx_shape = np.shape(node.attrs["index"]) if not isinstance(node.attrs["index"], ValueRef) \
        else ctx.shape(node.attrs["index"].name)
    if tuple(idx_shape) != ctx.shape(node.inputs[1]):
        src = ctx.emit("Slice", [src, ctx.ints([0] * len(idx_shape)), ctx.ints(idx_shape)])
    idx = ctx.attr_tensor(node, "index", dtype=np.int64)
    ctx.claim(node, "full")
    ctx.emit("ScatterElements", [x, idx, src], node.outputs, axis=int(node.attrs["axis"]),
             reduction="add")


@onnx_op("MaskedFill", opset=9, emits=("Where",))
def _masked_fill(ctx, node):
    mask = ctx.attr_tensor(node, "mask", dtype=np.bool_)
    value = ctx.scalar(node.attrs["value"], ctx.dtype(node.inputs[0]))
    ctx.emit("Where", [mask, value, _x(ctx, node)], node.outputs)


@onnx_op("Tri", opset=14, emits=("Trilu",))
def _tri(ctx, node):
    k = ctx.const(np.asarray(node.attrs["k"], np.int64), "k")
    ctx.emit("Trilu", [_x(ctx, node), k], node.outputs, upper=int(not node.attrs["lower"]))


@onnx_op("Concatenate", opset=11, emits=("Concat",))
def _concat(ctx, node):
    ctx.emit("Concat", ctx.ins(node), node.outputs, axis=int(node.attrs["axis"]))


@onnx_op("Split", opset=13, emits=("Split",))
def _split(ctx, node):
    axis = int(node.attrs["axis"])
    n = ctx.shape(node.inputs[0])[axis]
    cuts = [0] + [int(b) for b in node.attrs["bounds"]] + [n]
    sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    if "bounds" in ctx.dynamic_attrs(node):
        ctx.fail(node, "split along a dynamic axis")
    ctx.emit("Split", [_x(ctx, node), ctx.ints(sizes)], node.outputs, axis=axis)


@onnx_op("Flip", opset=10, emits=("Slice",))
def _flip(ctx, node):
    axes = node.attrs["axes"]
    ndim = len(ctx.shape(node.inputs[0]))
    axes = list(range(ndim)) if axes is None else [int(a) for a in (
        axes if isinstance(axes, (tuple, list)) else (axes,))]
    k = len(axes)
    ctx.emit("Slice", [_x(ctx, node), ctx.ints([-1] * k), ctx.ints([_SMALL] * k),
                       ctx.ints(axes), ctx.ints([-1] * k)], node.outputs)


@onnx_op("Roll", opset=11, emits=("Slice", "Concat", "Reshape"))
def _roll(ctx, node):
    shift, axis = node.attrs["shift"], node.attrs["axis"]
    shape = ctx.shape(node.inputs[0])
    x = _x(ctx, node)
    if axis is None:
        x, pairs = ctx.emit("Reshape", [x, ctx.ints([-1])]), [(shift, 0)]
        sizes = [int(np.prod(shape))]
    else:
        shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
        axes = axis if isinstance(axis, (tuple, list)) else (axis,)
        pairs, sizes = list(zip(shifts, axes)), [shape[a] for a in axes]
    for (s, a), n in zip(pairs, sizes):
        s = int(s) % n
        if s:
            tail = ctx.emit("Slice", [x, ctx.ints([n - s]), ctx.ints([n]), ctx.ints([a])])
            head = ctx.emit("Slice", [x, ctx.ints([0]), ctx.ints([n - s]), ctx.ints([a])])
            x = ctx.emit("Concat", [tail, head], axis=int(a))
    if axis is None:
        x = ctx.emit("Reshape", [x, ctx.ints(list(shape))])
    ctx.emit("Identity", [x], node.outputs)


@onnx_op("ConstantPad", opset=11, emits=("Pad",))
def _pad(ctx, node):
    widths = [(int(a), int(b)) for a, b in node.attrs["widths"]]
    pads = [a for a, _ in widths] + [b for _, b in widths]
    value = ctx.scalar(node.attrs["value"], ctx.dtype(node.inputs[0]))
    ctx.emit("Pad", [_x(ctx, node), ctx.ints(pads), value], node.outputs, mode="constant")


def _is_positions(v):
    """arange(T), possibly with leading axes of size 1 (HF's ``arange(T)[None]``)."""
    return v.ndim >= 1 and all(d == 1 for d in v.shape[:-1]) and np.array_equal(
        v.reshape(-1), np.arange(v.shape[-1]))


def _dynamic_positions(ctx, node):
    """Range(0, T) for indices that are arange(T) in both traces, T a dynamic input axis
    (GPT's positions); None otherwise."""
    a, b = node.attrs["indices"], ctx.other_attr(node, "indices")
    arrays = [np.asarray(cuda.as_numpy(v)) for v in (a, b)]
    if not all(_is_positions(v) for v in arrays) or arrays[0].ndim != arrays[1].ndim:
        return None
    limit = ctx.input_dim(arrays[0].shape[-1], arrays[1].shape[-1])
    if limit is None:
        return None
    zero, one = ctx.const(np.asarray(0, np.int64)), ctx.const(np.asarray(1, np.int64))
    idx = ctx.emit("Range", [zero, limit, one])
    lead = arrays[0].ndim - 1
    return ctx.emit("Unsqueeze", [idx, ctx.ints(list(range(lead)))]) if lead else idx


@onnx_op("Embedding", opset=13, emits=("Gather", "Range", "Shape", "Expand", "Unsqueeze",
                                       "Concat", "Cast"))
def _embedding(ctx, node):
    if "indices" in ctx.dynamic_attrs(node) and not isinstance(node.attrs["indices"], ValueRef):
        idx = _dynamic_positions(ctx, node)
        if idx is None:
            idx = ctx.fill_tensor(node.attrs["indices"], ctx.other_attr(node, "indices"))
        if idx is None:
            ctx.fail(node, "its indices are an array whose shape follows a dynamic axis and "
                     "is neither arange(axis) nor filled with one value; only indices that "
                     "are graph inputs, positions or such fills can be dynamic")
        idx = ctx.emit("Cast", [idx], to=ctx.tensor_type(np.int64))
        ctx.claim(node, "indices")
    else:
        idx = ctx.attr_tensor(node, "indices", dtype=np.int64)
    ctx.claim(node, "use_weight")
    ctx.emit("Gather", [_x(ctx, node), idx], node.outputs, axis=0)


@onnx_op("ScaleShift", opset=7, emits=("Mul", "Add"))
def _scale_shift(ctx, node):
    if "_dropout" in node.attrs:
        ctx.fail(node, "dropout in training mode; export the model in eval mode")
    y = ctx.emit("Mul", [_x(ctx, node), ctx.attr_tensor(node, "scale")])
    if node.attrs.get("shift") is not None:
        y = ctx.emit("Add", [y, ctx.attr_tensor(node, "shift")])
    ctx.emit("Identity", [y], node.outputs)
