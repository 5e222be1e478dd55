"""ONNX rules for products, convolution, pooling, normalization and attention."""
import math

import numpy as np

from lezero import cuda
from lezero.onnx.registry import onnx_op

_BIG = np.iinfo(np.int64).max


def _x(ctx, node):
    return ctx.ins(node)[0]


@onnx_op("MatMul", opset=9, emits=("MatMul",))
def _matmul(ctx, node):
    ctx.emit("MatMul", ctx.ins(node), node.outputs)


@onnx_op("Linear", opset=11, emits=("Gemm", "MatMul", "Transpose", "Add"))
def _linear(ctx, node):
    names = ctx.ins(node)
    if len(ctx.shape(node.inputs[0])) == 2:
        ctx.emit("Gemm", names, node.outputs, transB=1)
        return
    y = ctx.emit("MatMul", [names[0], ctx.emit("Transpose", [names[1]], perm=[1, 0])])
    if len(names) == 3:
        y = ctx.emit("Add", [y, names[2]])
    ctx.emit("Identity", [y], node.outputs)


@onnx_op("Einsum", opset=12, emits=("Einsum",))
def _einsum(ctx, node):
    eq = ",".join(node.attrs["terms"]) + "->" + node.attrs["out"]
    ctx.emit("Einsum", ctx.ins(node), node.outputs, equation=eq)


@onnx_op("Tensordot", opset=12, emits=("Einsum",))
def _tensordot(ctx, node):
    a_axes, b_axes = list(node.attrs["axes_a"]), list(node.attrs["axes_b"])
    na, nb = len(ctx.shape(node.inputs[0])), len(ctx.shape(node.inputs[1]))
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ta = [next(letters) for _ in range(na)]
    tb = [next(letters) for _ in range(nb)]
    for i, j in zip(a_axes, b_axes):
        tb[j % nb] = ta[i % na]
    out = [c for k, c in enumerate(ta) if k not in [i % na for i in a_axes]]
    out += [c for k, c in enumerate(tb) if k not in [j % nb for j in b_axes]]
    ctx.emit("Einsum", ctx.ins(node), node.outputs,
             equation=f"{''.join(ta)},{''.join(tb)}->{''.join(out)}")


@onnx_op("Det", opset=11, emits=("Det",))
def _det(ctx, node):
    ctx.emit("Det", ctx.ins(node), node.outputs)


# ----- convolution -------------------------------------------------------------------

def _conv_attrs(ctx, geom):
    return dict(kernel_shape=ctx.int_list(geom.kernel), strides=ctx.int_list(geom.stride),
                pads=ctx.int_list(tuple(geom.pad_lo) + tuple(geom.pad_hi)),
                dilations=ctx.int_list(geom.dilation), group=int(geom.groups))


@onnx_op("Conv", opset=11, emits=("Conv",))
def _conv(ctx, node):
    for key in ("geom", "cache"):
        ctx.claim(node, key)                   # in_size follows the input; ONNX infers it
    _check_spatial_static(ctx, node)
    ctx.emit("Conv", ctx.ins(node), node.outputs, **_conv_attrs(ctx, node.attrs["geom"]))


@onnx_op("ConvGradInput", opset=11, emits=("ConvTranspose",),
         notes="conv_transpose: the adjoint of a convolution")
def _conv_transpose(ctx, node):
    g = node.attrs["geom"]
    for key in ("geom", "cache"):
        ctx.claim(node, key)
    _check_spatial_static(ctx, node)
    # The transposed convolution's output is the forward convolution's input (in_size).
    natural = [(o - 1) * s - lo - hi + d * (k - 1) + 1 for o, s, lo, hi, d, k in zip(
        g.out_size, g.stride, g.pad_lo, g.pad_hi, g.dilation, g.kernel)]
    extra = [int(n - m) for n, m in zip(g.in_size, natural)]
    attrs = _conv_attrs(ctx, g)
    if any(extra):
        attrs["output_padding"] = extra
    ctx.emit("ConvTranspose", ctx.ins(node), node.outputs, **attrs)


def _check_spatial_static(ctx, node):
    a, b = ctx.shapes(node.inputs[0])
    if a[2:] != b[2:]:
        ctx.fail(node, "a dynamic spatial axis (only the batch axis of a convolution or "
                 "pooling may be dynamic)")


# ----- pooling -----------------------------------------------------------------------

def _pool_attrs(ctx, node, geom):
    pads = [int(p) for p in geom.padding] * 2
    ceil = 0
    for n, p, k, s, d, o in zip(geom.in_size, geom.padding, geom.kernel, geom.stride,
                                geom.dilation, geom.out_size):
        floor = (n + 2 * p - d * (k - 1) - 1) // s + 1
        if o != floor:
            ceil = 1
    return dict(kernel_shape=ctx.int_list(geom.kernel), strides=ctx.int_list(geom.stride),
                pads=pads, ceil_mode=ceil)


@onnx_op("MaxPoolNd", opset=12, emits=("MaxPool",))
def _max_pool(ctx, node):
    g = node.attrs["geom"]
    ctx.claim(node, "geom")
    _check_spatial_static(ctx, node)
    ctx.emit("MaxPool", [_x(ctx, node)], node.outputs, dilations=ctx.int_list(g.dilation),
             **_pool_attrs(ctx, node, g))


@onnx_op("AvgPoolNd", opset=11, emits=("AveragePool", "Mul", "Div"))
def _avg_pool(ctx, node):
    g = node.attrs["geom"]
    ctx.claim(node, "geom")
    _check_spatial_static(ctx, node)
    attrs = _pool_attrs(ctx, node, g)
    if attrs["ceil_mode"] or any(d != 1 for d in g.dilation):
        ctx.fail(node, "average pooling with ceil_mode or dilation")
    dt = ctx.dtype(node.inputs[0])
    volume = float(math.prod(g.kernel))
    mean = ctx.emit("AveragePool", [_x(ctx, node)], count_include_pad=1, **attrs)
    divisor = np.asarray(cuda.as_numpy(node.attrs["divisor"]), dtype=dt)
    if divisor.size == 1 and float(divisor.reshape(-1)[0]) == volume:
        ctx.emit("Identity", [mean], node.outputs)
        return
    total = ctx.emit("Mul", [mean, ctx.scalar(volume, dt)])
    ctx.emit("Div", [total, ctx.const(divisor, "divisor")], node.outputs)


@onnx_op("AdaptiveMaxPoolNd", opset=12, emits=("GlobalMaxPool", "MaxPool"))
def _adaptive_max(ctx, node):
    in_size = ctx.shape(node.inputs[0])[2:]
    out = tuple(node.attrs["out_size"])
    if all(o == 1 for o in out):
        ctx.emit("GlobalMaxPool", [_x(ctx, node)], node.outputs)
        return
    if any(n % o for n, o in zip(in_size, out)):
        ctx.fail(node, f"adaptive max pooling from {in_size} to {out} (not a whole kernel)")
    k = [n // o for n, o in zip(in_size, out)]
    ctx.emit("MaxPool", [_x(ctx, node)], node.outputs, kernel_shape=k, strides=k)


# ----- normalization -----------------------------------------------------------------

@onnx_op("Normalize", opset=17, emits=("LayerNormalization", "ReduceMean", "Sub", "Mul",
                                       "Sqrt", "Div", "Add", "Reshape"),
         notes="layer norm as LayerNormalization; batch/group/instance/RMS norm decomposed")
def _normalize(ctx, node):
    a = node.attrs
    names = ctx.ins(node)
    shape = ctx.shape(node.inputs[0])
    ndim = len(shape)
    axes = [int(x) % len(a["view"] or shape) for x in a["axes"]]
    trailing = a["view"] is None and axes == list(range(ndim - len(axes), ndim))
    ctx.claim(node, "use_kernel")
    _claim_batch_view(ctx, node)
    if a["center"] and trailing and a["has_weight"] and ctx.opset >= 17 and (
            tuple(a["param_shape"] or ()) == tuple(shape[ndim - len(axes):])):
        ctx.emit("LayerNormalization", names, node.outputs, axis=-len(axes),
                 epsilon=float(a["eps"]))
        return
    _normalize_decomposed(ctx, node, names, shape, axes)


def _claim_batch_view(ctx, node):
    """Group norm's view (N, G, -1) follows a dynamic batch only in N, which the decomposed
    form's Reshape copies from the input (its 0); any other axis stays refused."""
    if "view" in ctx.dynamic_attrs(node):
        view, other = node.attrs["view"], ctx.other_attr(node, "view")
        if len(view) == len(other) and tuple(view[1:]) == tuple(other[1:]):
            ctx.claim(node, "view")


def _normalize_decomposed(ctx, node, names, shape, axes):
    a = node.attrs
    dt = ctx.dtype(node.inputs[0])
    x = names[0]
    if a["view"] is not None:
        x = ctx.emit("Reshape", [x, ctx.ints([0] + list(a["view"][1:]))])
    if a["center"]:
        mean = ctx.axes_input_or_attr("ReduceMean", x, axes, 18, keepdims=True)
        x = ctx.emit("Sub", [x, mean])
    var = ctx.axes_input_or_attr("ReduceMean", ctx.emit("Mul", [x, x]), axes, 18,
                                 keepdims=True)
    std = ctx.emit("Sqrt", [ctx.emit("Add", [var, ctx.scalar(a["eps"], dt)])])
    y = ctx.emit("Div", [x, std])
    if a["view"] is not None:
        y = ctx.emit("Reshape", [y, ctx.ints([0] + list(shape[1:]))])
    params = list(zip(names[1:], node.inputs[1:]))
    pshape = list(a["param_shape"]) if a["param_shape"] is not None else None
    for flag, op in (("has_weight", "Mul"), ("has_bias", "Add")):
        if a[flag]:
            p, value = params.pop(0)
            if pshape is not None and list(ctx.shape(value)) != pshape:
                p = ctx.emit("Reshape", [p, ctx.ints(pshape)])
            y = ctx.emit(op, [y, p])
    ctx.emit("Identity", [y], node.outputs)


# ----- attention -----------------------------------------------------------------------

def _masked_scores(ctx, node, s, scale, causal, keep=None, mask_add=None):
    """scale * s, plus an additive mask, with -inf where ``keep`` or causality forbid."""
    dt = ctx.dtype(node.inputs[0])
    if scale != 1:
        s = ctx.emit("Mul", [s, ctx.scalar(scale, dt)])
    if mask_add is not None:
        s = ctx.emit("Add", [s, mask_add])
    neg = ctx.scalar(-np.inf, dt)
    if keep is not None:
        s = ctx.emit("Where", [keep, s, neg])
    if causal:
        s = ctx.emit("Where", [_causal_mask(ctx, node, s), s, neg])
    return s


def _causal_mask(ctx, node, scores):
    """tril(ones(L, S)) as bool: a constant, or built from the scores' run-time shape
    when L or S follows a dynamic axis."""
    if node.op == "MaskedSoftmax":
        a, b = (s[-2:] for s in ctx.shapes(node.outputs[0]))
    else:                               # attention: rows from the queries, keys' length
        (qa, qb), (ka, kb) = ctx.shapes(node.inputs[0]), ctx.shapes(node.inputs[1])
        a, b = (qa[-2], ka[-2]), (qb[-2], kb[-2])
    if a == b:
        return ctx.const(np.tril(np.ones(a, dtype=bool)), "causal")
    dims = ctx.emit("Slice", [ctx.emit("Shape", [scores]), ctx.ints([-2]), ctx.ints([_BIG])])
    one = ctx.helper.make_tensor("value", ctx.onnx.TensorProto.FLOAT, [1], [1.0])
    ones = ctx.emit("ConstantOfShape", [dims], value=one)
    tril = ctx.emit("Trilu", [ones], upper=0)
    return ctx.emit("Cast", [tril], to=ctx.tensor_type(bool))


@onnx_op("MaskedSoftmax", opset=14, emits=("Mul", "Where", "Softmax", "Trilu",
                                          "ConstantOfShape"))
def _masked_softmax(ctx, node):
    a = node.attrs
    keep = None if a["keep"] is None else ctx.attr_tensor(node, "keep", dtype=np.bool_)
    s = _masked_scores(ctx, node, _x(ctx, node), a["scale"], a["causal"], keep)
    ctx.emit("Softmax", [s], node.outputs, axis=-1)


@onnx_op("ChunkedAttention", opset=14, emits=("MatMul", "Transpose", "Softmax", "Where",
                                             "Trilu"))
def _attention(ctx, node):
    a = node.attrs
    if a["dropout_p"]:
        ctx.fail(node, "attention dropout in training mode; export in eval mode")
    _attention_graph(ctx, node)


@onnx_op("FusedAttention", opset=14, emits=("MatMul", "Transpose", "Softmax", "Where",
                                           "Trilu"))
def _fused_attention(ctx, node):
    _attention_graph(ctx, node)     # no mask but the causal one, no dropout


def _attention_graph(ctx, node):
    """softmax(mask(scale q k^T)) v, for both attention Functions."""
    a = node.attrs
    q, k, v = ctx.ins(node)
    nd = len(ctx.shape(node.inputs[1]))
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    s = ctx.emit("MatMul", [q, ctx.emit("Transpose", [k], perm=perm)])
    keep = None if a.get("keep") is None else ctx.attr_tensor(node, "keep", dtype=np.bool_)
    add = None if a.get("mask_add") is None else ctx.attr_tensor(node, "mask_add")
    ctx.claim(node, "block")
    s = _masked_scores(ctx, node, s, float(a["scale"]), a["causal"], keep, add)
    ctx.emit("MatMul", [ctx.emit("Softmax", [s], axis=-1), v], node.outputs)


def _square_shape(ctx, node):
    """The (N, N) shape of a ``DenseAdjacency``: written out, or read from the graph
    input axis that holds the node count when it is dynamic."""
    n = node.attrs["num_nodes"]
    if "num_nodes" not in ctx.dynamic_attrs(node):
        return ctx.ints([n, n])
    m = ctx.other_attr(node, "num_nodes")
    shape = ctx.run_time_shape((n, n), (m, m))
    if shape is None:
        ctx.fail(node, f"its node count ({n}) follows a dynamic axis that no graph input "
                 "has; give the node features a dynamic axis 0")
    ctx.claim(node, "num_nodes")
    return shape


@onnx_op("DenseAdjacency", opset=11, emits=("ConstantOfShape", "Transpose", "Shape", "Slice",
                                           "Expand", "ScatterND", "EyeLike", "Max", "Cast"),
         notes="GCN/GAT adjacency from edge_index")
def _dense_adjacency(ctx, node):
    """ones scattered at (source, target) into zeros, transposed to (target, source);
    a repeated edge writes the same 1 again, so the order ScatterND applies them in
    does not matter."""
    shape = _square_shape(ctx, node)
    zero = ctx.helper.make_tensor("value", ctx.onnx.TensorProto.FLOAT, [1], [0.0])
    empty = ctx.emit("ConstantOfShape", [shape], value=zero)
    edges = _x(ctx, node)
    if ctx.dtype(node.inputs[0]) != np.int64:
        edges = ctx.emit("Cast", [edges], to=ctx.tensor_type(np.int64))
    count = ctx.emit("Slice", [ctx.emit("Shape", [edges]), ctx.ints([1]), ctx.ints([2])])
    ones = ctx.emit("Expand", [ctx.scalar(1.0, np.float32), count])
    a = ctx.emit("ScatterND", [empty, ctx.emit("Transpose", [edges], perm=[1, 0]), ones])
    a = ctx.emit("Transpose", [a], perm=[1, 0])
    if node.attrs["add_self_loops"]:
        a = ctx.emit("Max", [a, ctx.emit("EyeLike", [empty])])
    ctx.emit("Identity", [a], node.outputs)
