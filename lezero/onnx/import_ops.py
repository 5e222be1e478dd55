"""ONNX operators run with LeZero: elementwise math, reductions and shape operators.

Each entry of ``IMPORT_OPS`` is ``fn(node, args, module) -> output(s)``: ``args`` are the
node's inputs (a Variable, a NumPy array, or None for an omitted optional input).
Values that are plain arrays (shapes, indices, constants) are computed with NumPy;
anything touching a Variable goes through ``lezero.functions`` so it is differentiable.
Neural-network operators live in ``import_nn`` and are merged in at the end.
"""
import numpy as np

import lezero.functions as F
from lezero.core import Variable

__all__ = ["IMPORT_OPS", "is_var", "arr", "ints"]

IMPORT_OPS = {}


def op(*names):
    def deco(fn):
        for name in names:
            IMPORT_OPS[name] = fn
        return fn
    return deco


def is_var(x):
    return isinstance(x, Variable)


def arr(x):
    return x.data if isinstance(x, Variable) else np.asarray(x)


def ints(x):
    return [int(v) for v in np.asarray(arr(x)).reshape(-1)]


def _binary(np_fn, f_fn):
    def run(node, args, module):
        a, b = args[:2]
        if not (is_var(a) or is_var(b)):
            return np_fn(np.asarray(a), np.asarray(b))
        return f_fn(a, b)
    return run


for _name, _np, _f in (("Add", np.add, F.add), ("Sub", np.subtract, F.sub),
                       ("Mul", np.multiply, F.mul), ("Pow", np.power, F.pow)):
    IMPORT_OPS[_name] = _binary(_np, _f)


@op("Div")
def _div(node, args, module):
    a, b = args
    if not (is_var(a) or is_var(b)):
        a, b = np.asarray(a), np.asarray(b)
        return a // b if a.dtype.kind in "iu" and b.dtype.kind in "iu" else a / b
    return F.div(a, b)


@op("Max", "Min", "Sum", "Mean")
def _variadic(node, args, module):
    pairs = {"Max": (np.maximum, F.maximum), "Min": (np.minimum, F.minimum),
             "Sum": (np.add, F.add), "Mean": (np.add, F.add)}
    np_fn, f_fn = pairs[node.op]
    out = args[0]
    for x in args[1:]:
        out = f_fn(out, x) if is_var(out) or is_var(x) else np_fn(out, x)
    return out / len(args) if node.op == "Mean" else out


def _unary(np_name, f_fn):
    def run(node, args, module):
        x = args[0]
        return f_fn(x) if is_var(x) else getattr(np, np_name)(np.asarray(x))
    return run


for _name, _np, _f in (("Neg", "negative", F.neg), ("Sqrt", "sqrt", F.sqrt),
                       ("Exp", "exp", F.exp), ("Log", "log", F.log), ("Abs", "abs", F.abs),
                       ("Sin", "sin", F.sin), ("Cos", "cos", F.cos), ("Tan", "tan", F.tan),
                       ("Asin", "arcsin", F.arcsin), ("Acos", "arccos", F.arccos),
                       ("Atan", "arctan", F.arctan), ("Sinh", "sinh", F.sinh),
                       ("Cosh", "cosh", F.cosh), ("Asinh", "arcsinh", F.arcsinh),
                       ("Acosh", "arccosh", F.arccosh), ("Atanh", "arctanh", F.arctanh),
                       ("Tanh", "tanh", F.tanh), ("Reciprocal", "reciprocal", F.reciprocal),
                       ("Floor", "floor", F.floor), ("Ceil", "ceil", F.ceil),
                       ("Sign", "sign", F.sign), ("Round", "round", F.round)):
    IMPORT_OPS[_name] = _unary(_np, _f)


@op("Erf")
def _erf(node, args, module):
    return F.erf(args[0])


@op("Relu", "Sigmoid", "Softsign", "HardSwish", "Mish")
def _activation(node, args, module):
    return {"Relu": F.relu, "Sigmoid": F.sigmoid, "Softsign": F.softsign,
            "HardSwish": F.hardswish, "Mish": F.mish}[node.op](args[0])


@op("LeakyRelu")
def _leaky(node, args, module):
    return F.leaky_relu(args[0], node.attrs.get("alpha", 0.01))


@op("Elu", "Celu")
def _elu(node, args, module):
    fn = F.elu if node.op == "Elu" else F.celu
    return fn(args[0], node.attrs.get("alpha", 1.0))


@op("Selu")
def _selu(node, args, module):
    alpha = node.attrs.get("alpha", 1.67326319217681884765625)
    gamma = node.attrs.get("gamma", 1.05070102214813232421875)
    return F.elu(args[0], alpha) * gamma


@op("Softplus")
def _softplus(node, args, module):
    return F.softplus(args[0], 1.0, float("inf"))


@op("HardSigmoid")
def _hardsigmoid(node, args, module):
    a, b = node.attrs.get("alpha", 0.2), node.attrs.get("beta", 0.5)
    return F.clip(args[0] * a + b, 0.0, 1.0)


@op("PRelu")
def _prelu(node, args, module):
    x, slope = args
    return F.where(arr(x) > 0, x, x * slope)


@op("Gelu")
def _gelu(node, args, module):
    return F.gelu(args[0], node.attrs.get("approximate", "none"))


@op("Shrink")
def _shrink(node, args, module):
    x, lambd, bias = args[0], node.attrs.get("lambd", 0.5), node.attrs.get("bias", 0.0)
    data = arr(x)
    return F.where(data > lambd, x - bias, F.where(data < -lambd, x + bias, x * 0.0))


@op("Clip")
def _clip(node, args, module):
    x = args[0]
    lo = args[1] if len(args) > 1 else node.attrs.get("min")
    hi = args[2] if len(args) > 2 else node.attrs.get("max")
    lo = None if lo is None else float(arr(lo))
    hi = None if hi is None else float(arr(hi))
    return F.clip(x, lo, hi) if is_var(x) else np.clip(arr(x), lo, hi)


@op("Where")
def _where(node, args, module):
    cond, a, b = args
    if not (is_var(a) or is_var(b)):
        return np.where(arr(cond), a, b)
    return F.where(arr(cond).astype(bool), a, b)


@op("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
def _compare(node, args, module):
    fn = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual":
          np.less_equal, "GreaterOrEqual": np.greater_equal, "And": np.logical_and,
          "Or": np.logical_or, "Xor": np.logical_xor}[node.op]
    return fn(arr(args[0]), arr(args[1]))


@op("Not", "IsNaN", "IsInf")
def _logical_unary(node, args, module):
    return {"Not": np.logical_not, "IsNaN": np.isnan, "IsInf": np.isinf}[node.op](arr(args[0]))


# ----- reductions ----------------------------------------------------------------------

def _reduce_axes(node, args, module):
    axes = node.attrs.get("axes")
    if len(args) > 1 and args[1] is not None:
        axes = ints(args[1])
    if not axes:
        return None if not node.attrs.get("noop_with_empty_axes", 0) else ()
    return tuple(axes)


@op("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSumExp",
    "ReduceL1", "ReduceL2", "ReduceSumSquare")
def _reduce(node, args, module):
    x, axes = args[0], _reduce_axes(node, args, module)
    keep = bool(node.attrs.get("keepdims", 1))
    if axes == ():
        return x
    if node.op == "ReduceL1":
        x, name = F.abs(x) if is_var(x) else np.abs(x), "ReduceSum"
    elif node.op in ("ReduceL2", "ReduceSumSquare"):
        x, name = x * x, "ReduceSum"
    else:
        name = node.op
    if not is_var(x):
        fn = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
              "ReduceMin": np.min, "ReduceProd": np.prod}.get(name)
        if fn is not None:
            out = fn(np.asarray(x), axis=axes, keepdims=keep)
            return np.sqrt(out) if node.op == "ReduceL2" else out
        x = Variable(np.asarray(x), requires_grad=False)
    fn = {"ReduceSum": F.sum, "ReduceMean": F.mean, "ReduceMax": F.max, "ReduceMin": F.min,
          "ReduceProd": F.prod, "ReduceLogSumExp": F.logsumexp}[name]
    out = fn(x, axis=axes, keepdims=keep)
    return F.sqrt(out) if node.op == "ReduceL2" else out


@op("ArgMax", "ArgMin")
def _arg(node, args, module):
    fn = np.argmax if node.op == "ArgMax" else np.argmin
    axis = node.attrs.get("axis", 0)
    out = fn(arr(args[0]), axis=axis)
    return np.expand_dims(out, axis) if node.attrs.get("keepdims", 1) else out


@op("CumSum")
def _cumsum(node, args, module):
    x, axis = args[0], int(arr(args[1]).reshape(-1)[0])   # a 0-D tensor, or 1-D of one
    if node.attrs.get("exclusive", 0):
        raise ValueError("CumSum with exclusive=1 is not supported")
    if node.attrs.get("reverse", 0):
        return F.flip(F.cumsum(F.flip(x, axis), axis), axis)
    return F.cumsum(x, axis) if is_var(x) else np.cumsum(arr(x), axis)


from lezero.onnx import import_shape  # noqa: E402,F401  (registers the shape operators)
from lezero.onnx import import_nn  # noqa: E402,F401  (registers the network operators)
