"""ONNX rules for arithmetic, elementwise math, reductions and activations."""
import math

import numpy as np

from lezero.onnx.registry import onnx_op


def _x(ctx, node):
    return ctx.ins(node)[0]


def _out(node):
    return node.outputs


def _same(onnx_type, *names, opset=7):
    """Register Function classes that map one-to-one onto ``onnx_type``."""
    def rule(ctx, node):
        ctx.emit(onnx_type, ctx.ins(node), _out(node))
    onnx_op(*names, opset=opset, emits=(onnx_type,))(rule)


for _onnx, _names, _opset in (
        ("Add", ("Add",), 7), ("Sub", ("Sub",), 7), ("Mul", ("Mul",), 7), ("Div", ("Div",), 7),
        ("Pow", ("Pow",), 7), ("Neg", ("Neg",), 6), ("Sqrt", ("Sqrt",), 6),
        ("Reciprocal", ("Reciprocal",), 6), ("Exp", ("Exp",), 6), ("Log", ("Log",), 6),
        ("Abs", ("Abs",), 6), ("Sin", ("Sin",), 7), ("Cos", ("Cos",), 7), ("Tan", ("Tan",), 7),
        ("Asin", ("Arcsin",), 7), ("Acos", ("Arccos",), 7), ("Atan", ("Arctan",), 7),
        ("Sinh", ("Sinh",), 9), ("Cosh", ("Cosh",), 9), ("Asinh", ("Arcsinh",), 9),
        ("Acosh", ("Arccosh",), 9), ("Atanh", ("Arctanh",), 9), ("Tanh", ("Tanh",), 6),
        ("Erf", ("Erf",), 9), ("Sign", ("Sign",), 9), ("Floor", ("Floor",), 6),
        ("Ceil", ("Ceil",), 6), ("Relu", ("ReLU",), 6), ("Sigmoid", ("Sigmoid",), 6),
        ("Softsign", ("Softsign",), 1), ("HardSwish", ("HardSwish",), 14),
        ):
    _same(_onnx, *_names, opset=_opset)
del _onnx, _names, _opset


def _one(ctx, value):
    return ctx.scalar(1, ctx.dtype(value))


@onnx_op("Square", opset=7, emits=("Mul",))
def _square(ctx, node):
    x = _x(ctx, node)
    ctx.emit("Mul", [x, x], _out(node))


@onnx_op("Rsqrt", opset=6, emits=("Sqrt", "Reciprocal"))
def _rsqrt(ctx, node):
    ctx.emit("Reciprocal", [ctx.emit("Sqrt", [_x(ctx, node)])], _out(node))


@onnx_op("Expm1", opset=7, emits=("Exp", "Sub"))
def _expm1(ctx, node):
    ctx.emit("Sub", [ctx.emit("Exp", [_x(ctx, node)]), _one(ctx, node.inputs[0])], _out(node))


@onnx_op("Log1p", opset=7, emits=("Add", "Log"))
def _log1p(ctx, node):
    ctx.emit("Log", [ctx.emit("Add", [_x(ctx, node), _one(ctx, node.inputs[0])])], _out(node))


@onnx_op("Log2", "Log10", opset=7, emits=("Log", "Div"))
def _log_base(ctx, node):
    base = 2.0 if node.op == "Log2" else 10.0
    ln = ctx.scalar(math.log(base), ctx.dtype(node.inputs[0]))
    ctx.emit("Div", [ctx.emit("Log", [_x(ctx, node)]), ln], _out(node))


@onnx_op("Erfc", opset=9, emits=("Erf", "Sub"))
def _erfc(ctx, node):
    ctx.emit("Sub", [_one(ctx, node.inputs[0]), ctx.emit("Erf", [_x(ctx, node)])], _out(node))


@onnx_op("Round", opset=11, emits=("Round", "Mul", "Div"))
def _round(ctx, node):
    decimals = node.attrs.get("decimals", 0) or 0
    x = _x(ctx, node)
    if decimals == 0:
        ctx.emit("Round", [x], _out(node))
        return
    scale = ctx.scalar(10.0 ** decimals, ctx.dtype(node.inputs[0]))
    ctx.emit("Div", [ctx.emit("Round", [ctx.emit("Mul", [x, scale])]), scale], _out(node))


@onnx_op("Arctan2", opset=9, emits=("Div", "Atan", "Where", "Less", "Add"))
def _arctan2(ctx, node):
    y, x = ctx.ins(node)
    dt = ctx.dtype(node.inputs[0])
    base = ctx.emit("Atan", [ctx.emit("Div", [y, x])])
    zero = ctx.scalar(0, dt)
    turn = ctx.emit("Where", [ctx.emit("Less", [y, zero]), ctx.scalar(-math.pi, dt),
                              ctx.scalar(math.pi, dt)])
    fix = ctx.emit("Where", [ctx.emit("Less", [x, zero]), turn, zero])
    ctx.emit("Add", [base, fix], _out(node))


@onnx_op("Hypot", opset=7, emits=("Mul", "Add", "Sqrt"))
def _hypot(ctx, node):
    a, b = ctx.ins(node)
    ctx.emit("Sqrt", [ctx.emit("Add", [ctx.emit("Mul", [a, a]), ctx.emit("Mul", [b, b])])],
             _out(node))


@onnx_op("Extremum", opset=8, emits=("Max", "Min"))
def _extremum(ctx, node):
    ctx.emit("Max" if node.attrs["largest"] else "Min", ctx.ins(node), _out(node))


@onnx_op("Clip", opset=8, emits=("Max", "Min"))
def _clip(ctx, node):
    names = ctx.ins(node)
    x, rest = names[0], names[1:]
    if node.attrs["has_lo"]:
        x = ctx.emit("Max", [x, rest.pop(0)])
    if node.attrs["has_hi"]:
        x = ctx.emit("Min", [x, rest.pop(0)])
    ctx.emit("Identity", [x], _out(node))


@onnx_op("Where", opset=9, emits=("Where",))
def _where(ctx, node):
    cond = ctx.attr_tensor(node, "condition", dtype=np.bool_)
    ctx.emit("Where", [cond] + ctx.ins(node), _out(node))


@onnx_op("Cast", opset=13, emits=("Cast",))
def _cast(ctx, node):
    ctx.emit("Cast", ctx.ins(node), _out(node), to=ctx.tensor_type(node.attrs["dtype"]))


# ----- reductions ----------------------------------------------------------------------

def _axes(axis):
    if axis is None:
        return None
    return [int(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]


def _reduce(onnx_type, since):
    def rule(ctx, node):
        ctx.axes_input_or_attr(onnx_type, _x(ctx, node), _axes(node.attrs.get("axis")), since,
                               keepdims=node.attrs.get("keepdims", False), outputs=_out(node))
    return rule


onnx_op("Sum", opset=13, emits=("ReduceSum",))(_reduce("ReduceSum", 13))
onnx_op("Mean", opset=13, emits=("ReduceMean",))(_reduce("ReduceMean", 18))
onnx_op("Prod", opset=13, emits=("ReduceProd",))(_reduce("ReduceProd", 18))
onnx_op("LogSumExp", opset=13, emits=("ReduceLogSumExp",))(_reduce("ReduceLogSumExp", 18))


@onnx_op("MaxMin", opset=13, emits=("ReduceMax", "ReduceMin"))
def _maxmin(ctx, node):
    _reduce("ReduceMax" if node.attrs["largest"] else "ReduceMin", 18)(ctx, node)


@onnx_op("Reduce", opset=13, emits=("ArgMax", "ArgMin", "ReduceMin", "ReduceMax", "Cast"))
def _reduce_nd(ctx, node):
    name, axis = node.attrs["name"], node.attrs["axis"]
    if name in ("all", "any"):
        x = ctx.emit("Cast", [ctx.emit("Cast", [_x(ctx, node)], to=ctx.tensor_type(bool))],
                     to=ctx.tensor_type(np.int32))
        y = ctx.axes_input_or_attr("ReduceMin" if name == "all" else "ReduceMax", x,
                                   _axes(axis), 18, keepdims=node.attrs["keepdims"])
        ctx.emit("Cast", [y], node.outputs, to=ctx.tensor_type(bool))
        return
    if name not in ("argmax", "argmin"):
        ctx.fail(node, f"the reduction {name!r} has no ONNX mapping")
    x = _x(ctx, node)
    if axis is None:
        x, axis = ctx.emit("Reshape", [x, ctx.ints([-1])]), 0
    op = "ArgMax" if name == "argmax" else "ArgMin"
    ctx.emit(op, [x], _out(node), axis=int(axis), keepdims=int(bool(node.attrs["keepdims"])))


@onnx_op("Var", opset=13, emits=("ReduceMean", "Sub", "Mul"))
def _var(ctx, node):
    x, axes = _x(ctx, node), _axes(node.attrs["axis"])
    shape = ctx.shape(node.inputs[0])
    n = int(np.prod([shape[a] for a in axes]) if axes is not None else np.prod(shape))
    dt = ctx.dtype(node.inputs[0])
    mean = ctx.axes_input_or_attr("ReduceMean", x, axes, 18, keepdims=True)
    d = ctx.emit("Sub", [x, mean])
    m2 = ctx.axes_input_or_attr("ReduceMean", ctx.emit("Mul", [d, d]), axes, 18,
                                keepdims=node.attrs["keepdims"])
    ctx.emit("Mul", [m2, ctx.scalar(n / max(n - node.attrs["ddof"], 1), dt)], _out(node))


@onnx_op("PNorm", opset=13, emits=("ReduceL1", "ReduceL2", "Pow", "ReduceSum"))
def _pnorm(ctx, node):
    p, axes, keep = node.attrs["p"], _axes(node.attrs["axis"]), node.attrs["keepdims"]
    x = _x(ctx, node)
    if p in (1, 2):
        ctx.axes_input_or_attr(f"ReduceL{int(p)}", x, axes, 18, keepdims=keep,
                               outputs=_out(node))
        return
    if not (isinstance(p, (int, float)) and 0 < p < float("inf")):
        ctx.fail(node, f"norm with p={p} has no ONNX mapping")
    dt = ctx.dtype(node.inputs[0])
    s = ctx.axes_input_or_attr("ReduceSum", ctx.emit("Pow", [ctx.emit("Abs", [x]),
                                                             ctx.scalar(p, dt)]),
                               axes, 13, keepdims=keep)
    ctx.emit("Pow", [s, ctx.scalar(1.0 / p, dt)], _out(node))


@onnx_op("CumSum", opset=11, emits=("CumSum",))
def _cumsum(ctx, node):
    ctx.emit("CumSum", [_x(ctx, node), ctx.const(np.asarray(node.attrs["axis"], np.int64))],
             _out(node), reverse=int(bool(node.attrs.get("reverse", False))))


# ----- activations ---------------------------------------------------------------------

@onnx_op("LeakyReLU", opset=6, emits=("LeakyRelu",))
def _leaky(ctx, node):
    ctx.emit("LeakyRelu", [_x(ctx, node)], _out(node), alpha=float(node.attrs["slope"]))


@onnx_op("HardTanh", opset=11, emits=("Clip",))
def _hardtanh(ctx, node):
    dt = ctx.dtype(node.inputs[0])
    ctx.emit("Clip", [_x(ctx, node), ctx.scalar(node.attrs["lo"], dt),
                      ctx.scalar(node.attrs["hi"], dt)], _out(node))


@onnx_op("HardSigmoid", opset=6, emits=("HardSigmoid",))
def _hardsigmoid(ctx, node):
    ctx.emit("HardSigmoid", [_x(ctx, node)], _out(node), alpha=1 / 6, beta=0.5)


@onnx_op("ELU", opset=6, emits=("Elu", "Selu"))
def _elu(ctx, node):
    alpha, scale = float(node.attrs["alpha"]), float(node.attrs["scale"])
    if scale == 1.0:
        ctx.emit("Elu", [_x(ctx, node)], _out(node), alpha=alpha)
    else:
        ctx.emit("Selu", [_x(ctx, node)], _out(node), alpha=alpha, gamma=scale)


@onnx_op("CELU", opset=12, emits=("Celu",))
def _celu(ctx, node):
    ctx.emit("Celu", [_x(ctx, node)], _out(node), alpha=float(node.attrs["alpha"]))


def _softplus_beta(ctx, node, x):
    """softplus with beta and threshold, as F.softplus."""
    beta, thr = float(node.attrs["beta"]), float(node.attrs["threshold"])
    dt = ctx.dtype(node.inputs[0])
    z = x if beta == 1 else ctx.emit("Mul", [x, ctx.scalar(beta, dt)])
    sp = ctx.emit("Softplus", [z])
    if beta != 1:
        sp = ctx.emit("Div", [sp, ctx.scalar(beta, dt)])
    return ctx.emit("Where", [ctx.emit("Greater", [z, ctx.scalar(thr, dt)]), x, sp])


@onnx_op("Softplus", opset=9, emits=("Softplus", "Where", "Greater", "Mul", "Div"))
def _softplus(ctx, node):
    ctx.emit("Identity", [_softplus_beta(ctx, node, _x(ctx, node))], _out(node))


@onnx_op("LogSigmoid", opset=6, emits=("Neg", "Softplus"))
def _logsigmoid(ctx, node):
    x = _x(ctx, node)
    ctx.emit("Neg", [ctx.emit("Softplus", [ctx.emit("Neg", [x])])], _out(node))


@onnx_op("SiLU", opset=6, emits=("Sigmoid", "Mul"))
def _silu(ctx, node):
    x = _x(ctx, node)
    ctx.emit("Mul", [x, ctx.emit("Sigmoid", [x])], _out(node))


@onnx_op("Mish", opset=6, emits=("Softplus", "Tanh", "Mul"))
def _mish(ctx, node):
    x = _x(ctx, node)
    ctx.emit("Mul", [x, ctx.emit("Tanh", [ctx.emit("Softplus", [x])])], _out(node))


@onnx_op("TanhShrink", opset=6, emits=("Tanh", "Sub"))
def _tanhshrink(ctx, node):
    x = _x(ctx, node)
    ctx.emit("Sub", [x, ctx.emit("Tanh", [x])], _out(node))


@onnx_op("PReLU", opset=9, emits=("PRelu", "Reshape"))
def _prelu(ctx, node):
    x, w = ctx.ins(node)
    ndim, size = len(ctx.shape(node.inputs[0])), int(np.prod(ctx.shape(node.inputs[1])))
    shape = [1] if size == 1 else [size] + [1] * (ndim - 2)
    ctx.emit("PRelu", [x, ctx.emit("Reshape", [w, ctx.ints(shape)])], _out(node))


@onnx_op("GELU", opset=9, emits=("Erf", "Tanh", "Mul", "Add", "Pow"))
def _gelu(ctx, node):
    x, dt = _x(ctx, node), ctx.dtype(node.inputs[0])
    half, one = ctx.scalar(0.5, dt), ctx.scalar(1.0, dt)
    if node.attrs.get("approximate") == "tanh":
        cube = ctx.emit("Mul", [ctx.emit("Mul", [x, x]), x])
        inner = ctx.emit("Add", [x, ctx.emit("Mul", [cube, ctx.scalar(0.044715, dt)])])
        t = ctx.emit("Tanh", [ctx.emit("Mul", [inner, ctx.scalar(math.sqrt(2 / math.pi), dt)])])
    else:
        t = ctx.emit("Erf", [ctx.emit("Mul", [x, ctx.scalar(1 / math.sqrt(2), dt)])])
    ctx.emit("Mul", [ctx.emit("Mul", [x, half]), ctx.emit("Add", [t, one])], _out(node))


@onnx_op("HardShrink", "SoftShrink", opset=9, emits=("Shrink",))
def _shrink(ctx, node):
    lambd = float(node.attrs.get("lambd", 0.5))
    bias = lambd if node.op == "SoftShrink" else 0.0
    ctx.emit("Shrink", [_x(ctx, node)], _out(node), lambd=lambd, bias=bias)


@onnx_op("Threshold", opset=9, emits=("Greater", "Where"))
def _threshold(ctx, node):
    x, dt = _x(ctx, node), ctx.dtype(node.inputs[0])
    keep = ctx.emit("Greater", [x, ctx.scalar(node.attrs["threshold"], dt)])
    ctx.emit("Where", [keep, x, ctx.scalar(node.attrs["value"], dt)], _out(node))


@onnx_op("Softmax", "LogSoftmax", opset=13, emits=("Softmax", "LogSoftmax"))
def _softmax(ctx, node):
    ctx.emit(node.op, [_x(ctx, node)], _out(node), axis=int(node.attrs["axis"]))


# ----- loss pieces and windows ---------------------------------------------------------

@onnx_op("SmoothL1", opset=9, emits=("Abs", "Less", "Mul", "Sub", "Where"))
def _smooth_l1(ctx, node):
    d, dt, beta = _x(ctx, node), ctx.dtype(node.inputs[0]), float(node.attrs["beta"])
    a = ctx.emit("Abs", [d])
    if not beta:
        ctx.emit("Identity", [a], _out(node))
        return
    quad = ctx.emit("Mul", [ctx.emit("Mul", [d, d]), ctx.scalar(0.5 / beta, dt)])
    lin = ctx.emit("Sub", [a, ctx.scalar(0.5 * beta, dt)])
    ctx.emit("Where", [ctx.emit("Less", [a, ctx.scalar(beta, dt)]), quad, lin], _out(node))


@onnx_op("XLogX", opset=11, emits=("Equal", "Log", "Mul", "Where"))
def _xlogx(ctx, node):
    x, dt = _x(ctx, node), ctx.dtype(node.inputs[0])
    zero = ctx.scalar(0, dt)
    safe = ctx.emit("Where", [ctx.emit("Equal", [x, zero]), ctx.scalar(1, dt), x])
    ctx.emit("Where", [ctx.emit("Equal", [x, zero]), zero,
                       ctx.emit("Mul", [x, ctx.emit("Log", [safe])])], _out(node))


@onnx_op("BinaryCrossEntropy", opset=8, emits=("Log", "Max", "Sub", "Mul", "Add", "Neg"))
def _bce(ctx, node):
    x, t = ctx.ins(node)
    dt = ctx.dtype(node.inputs[0])
    floor, one = ctx.scalar(-100, dt), ctx.scalar(1, dt)
    log_x = ctx.emit("Max", [ctx.emit("Log", [x]), floor])
    log_1mx = ctx.emit("Max", [ctx.emit("Log", [ctx.emit("Sub", [one, x])]), floor])
    total = ctx.emit("Add", [ctx.emit("Mul", [t, log_x]),
                             ctx.emit("Mul", [ctx.emit("Sub", [one, t]), log_1mx])])
    ctx.emit("Neg", [total], _out(node))


@onnx_op("ChannelWindowSum", opset=11, emits=("Pad", "Slice", "Add"))
def _channel_window_sum(ctx, node):
    before, after = int(node.attrs["before"]), int(node.attrs["after"])
    shape = ctx.shape(node.inputs[0])
    n_ch, ndim = shape[1], len(shape)
    pads = [0] * (2 * ndim)
    pads[1], pads[ndim + 1] = before, after
    padded = ctx.emit("Pad", [_x(ctx, node), ctx.ints(pads)], mode="constant")
    total = None
    for k in range(before + after + 1):
        part = ctx.emit("Slice", [padded, ctx.ints([k]), ctx.ints([k + n_ch]), ctx.ints([1])])
        total = part if total is None else ctx.emit("Add", [total, part])
    ctx.emit("Identity", [total], _out(node))
