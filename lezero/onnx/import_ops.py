"""ONNX operators run with LeZero: elementwise math, reductions and shape operators.

Each entry of ``IMPORT_OPS`` is ``fn(node, args, module) -> output(s)``: ``args`` are the
node's inputs (a Variable, a NumPy array, or None for an omitted optional input).
Values that are plain arrays (shapes, indices, constants) are computed with NumPy;
anything touching a Variable goes through ``lezero.functions`` so it is differentiable.
Neural-network operators live in ``import_nn`` and are merged in at the end.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.amp.cast import cast as _cast_variable
from lezero.core import Variable

__all__ = ["IMPORT_OPS", "is_var", "arr", "ints", "as_dtype", "scalar",
           "via_float32"]

IMPORT_OPS = {}


def op(*names):
    """Register ``fn(node, args, module)`` for ONNX operators ``names``; a name already
    registered is an error (two modules would otherwise override one another silently)."""
    def deco(fn):
        for name in names:
            if name in IMPORT_OPS:
                raise ValueError(f"ONNX operator {name!r} is imported twice "
                                 f"({IMPORT_OPS[name].__module__} and {fn.__module__})")
            IMPORT_OPS[name] = fn
        return fn
    return deco


def is_var(x):
    return isinstance(x, Variable)


def arr(x):
    return x.data if isinstance(x, Variable) else np.asarray(x)


def ints(x):
    return [int(v) for v in np.asarray(arr(x)).reshape(-1)]


def scalar(x):
    """The one value of a 0-D or one-element tensor (ONNX passes both), on the host."""
    values = np.asarray(cuda.as_numpy(arr(x))).reshape(-1)
    if values.size != 1:
        raise ValueError(f"expected a scalar (one value), got shape {np.shape(arr(x))}")
    return values[0]


def as_dtype(x, dtype):
    """``x`` as ``dtype``: a differentiable cast for a Variable, ``astype`` for an array."""
    if is_var(x):
        return _cast_variable(x, dtype)
    return np.asarray(x).astype(dtype, copy=False)


def via_float32(fn, *xs, half=False):
    """``fn(*xs)`` in float32, cast back, when the first input is bfloat16 (or, with
    ``half``, float16 on the CPU), which NumPy kernels cannot compute or which LeZero's
    functions return widened; otherwise ``fn(*xs)`` as it is."""
    dtype = arr(xs[0]).dtype
    narrow = dtype.itemsize == 2 and dtype.kind in "fV" and (
        dtype.kind == "V" or half and isinstance(arr(xs[0]), np.ndarray))
    if not narrow:
        return fn(*xs)
    wide = [as_dtype(x, np.float32) if x is not None and arr(x).dtype == dtype else x
            for x in xs]
    return as_dtype(fn(*wide), dtype)


def _binary(np_fn, f_fn):
    def run(node, args, module):
        a, b = args[:2]
        if not (is_var(a) or is_var(b)):
            return np_fn(np.asarray(a), np.asarray(b))
        return f_fn(a, b)
    return run


for _name, _np, _f in (("Add", np.add, F.add), ("Sub", np.subtract, F.sub),
                       ("Mul", np.multiply, F.mul)):
    IMPORT_OPS[_name] = _binary(_np, _f)


def _plain(like, value):
    """``value`` (an array computed from ``arr`` data) as a constant Variable when ``like``
    was a Variable (integer results carry no gradient), else as it is."""
    return Variable(value, requires_grad=False) if is_var(like) else value


def _trunc_div(a, b):
    """Integer division rounding toward zero, as ONNX (like C) defines it; NumPy's ``//``
    floors, which differs when the exact quotient is negative and not whole."""
    q = a // b
    inexact = (a % b != 0) & ((a < 0) != (b < 0))
    return (q + inexact).astype(q.dtype, copy=False)


@op("Div")
def _div(node, args, module):
    a, b = args
    if arr(a).dtype.kind in "iub" and arr(b).dtype.kind in "iub":
        return _plain(a if is_var(a) else b, _trunc_div(arr(a), arr(b)))
    if not (is_var(a) or is_var(b)):
        return np.asarray(a) / np.asarray(b)
    return F.div(a, b)


@op("Pow")
def _pow(node, args, module):
    """The result has the base's dtype (ONNX: float32 ** int64 is float32, and
    int32 ** float32 is int32, the power truncated)."""
    a, b = args
    dtype = arr(a).dtype
    if dtype.kind != "f":
        out = np.power(arr(a).astype(np.float64), arr(b)) if arr(b).dtype.kind == "f" \
            else np.power(arr(a), arr(b).astype(dtype))
        return _plain(a, out.astype(dtype))
    if not is_var(b):
        b = np.asarray(arr(b)).astype(dtype)
    if not (is_var(a) or is_var(b)):
        return np.power(np.asarray(a), b)
    return as_dtype(F.pow(a, b), dtype)


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
    return via_float32(lambda x: fn(x, node.attrs.get("alpha", 1.0)), args[0])


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
    """Bounds take the input's dtype, so an int8 clip stays int8; min > max gives max."""
    x = args[0]
    lo = args[1] if len(args) > 1 else node.attrs.get("min")
    hi = args[2] if len(args) > 2 else node.attrs.get("max")
    dtype = arr(x).dtype
    lo = None if lo is None else scalar(lo).astype(dtype)
    hi = None if hi is None else scalar(hi).astype(dtype)
    if not (is_var(x) and dtype.kind == "f"):
        out = arr(x)
        out = out if lo is None else np.maximum(out, lo)
        return _plain(x, (out if hi is None else np.minimum(out, hi)).astype(dtype))
    if lo is not None and hi is not None and lo > hi:
        lo = hi
    return F.clip(x, None if lo is None else float(lo), None if hi is None else float(hi))


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


@op("Not", "IsNaN")
def _logical_unary(node, args, module):
    return {"Not": np.logical_not, "IsNaN": np.isnan}[node.op](arr(args[0]))


@op("IsInf")
def _isinf(node, args, module):
    data = arr(args[0])
    out = np.isinf(data)
    if not node.attrs.get("detect_negative", 1):
        out &= data > 0
    if not node.attrs.get("detect_positive", 1):
        out &= data < 0
    return out


# ----- reductions ----------------------------------------------------------------------

def _reduce_axes(node, args, module):
    axes = node.attrs.get("axes")
    if len(args) > 1 and args[1] is not None:
        axes = ints(args[1])
    if not axes:
        return None if not node.attrs.get("noop_with_empty_axes", 0) else ()
    return tuple(axes)


def _empty_identity(op, dtype):
    """What a reduction over no elements gives (ONNX: the operation's identity)."""
    if op in ("ReduceMax", "ReduceLogSumExp", "ReduceMin"):
        high = op == "ReduceMin"
        if dtype.kind == "b":
            return high
        if dtype.kind in "iu":
            return np.iinfo(dtype).max if high else np.iinfo(dtype).min
        return np.inf if high else -np.inf
    return {"ReduceProd": 1, "ReduceMean": np.nan, "ReduceLogSum": -np.inf}.get(op, 0)


def _reduce_empty(node, x, axes, keep):
    """The result of reducing ``x`` over axes of which one is empty: a constant."""
    data = arr(x)
    picked = range(data.ndim) if axes is None else [a % data.ndim for a in axes]
    shape = tuple(1 if k in picked else n for k, n in enumerate(data.shape)
                  if keep or k not in picked)
    return np.full(shape, _empty_identity(node.op, data.dtype), dtype=data.dtype)


_SUMMED = {"ReduceL1": "ReduceSum", "ReduceL2": "ReduceSum", "ReduceSumSquare": "ReduceSum",
           "ReduceLogSum": "ReduceSum"}
_NP_REDUCE = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
              "ReduceMin": np.min, "ReduceProd": np.prod}
_F_REDUCE = {"ReduceSum": F.sum, "ReduceMean": F.mean, "ReduceMax": F.max, "ReduceMin": F.min,
             "ReduceProd": F.prod, "ReduceLogSumExp": F.logsumexp}


def _reduce_with(name, x, axes, keep):
    """Reduction ``name`` of a Variable (differentiable) or of an array (NumPy, the
    input's dtype kept: NumPy would sum int32 as int64 and average it as float64)."""
    if not is_var(x) and name in _NP_REDUCE:
        data = np.asarray(x)
        out = _NP_REDUCE[name](data, axis=axes, keepdims=keep)
        return np.asarray(out).astype(data.dtype, copy=False)
    if not is_var(x):
        x = Variable(np.asarray(x), requires_grad=False)
    return _F_REDUCE[name](x, axis=axes, keepdims=keep)


@op("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSumExp",
    "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum")
def _reduce(node, args, module):
    x, axes = args[0], _reduce_axes(node, args, module)
    keep = bool(node.attrs.get("keepdims", 1))
    if axes == ():
        return x
    shape = arr(x).shape
    if 0 in (shape if axes is None else [shape[a] for a in axes]):
        return _reduce_empty(node, x, axes, keep)
    if node.op == "ReduceL1":
        x = F.abs(x) if is_var(x) else np.abs(x)
    elif node.op in ("ReduceL2", "ReduceSumSquare"):
        x = x * x
    out = _reduce_with(_SUMMED.get(node.op, node.op), x, axes, keep)
    if node.op in ("ReduceL2", "ReduceLogSum"):
        fns = (F.sqrt, np.sqrt) if node.op == "ReduceL2" else (F.log, np.log)
        return fns[0](out) if is_var(out) else fns[1](out)
    return out


@op("ArgMax", "ArgMin")
def _arg(node, args, module):
    """With ``select_last_index`` the last of tied extremes wins (searched flipped)."""
    fn = np.argmax if node.op == "ArgMax" else np.argmin
    data, axis = arr(args[0]), node.attrs.get("axis", 0)
    if node.attrs.get("select_last_index", 0):
        out = data.shape[axis] - 1 - fn(np.flip(data, axis), axis=axis)
    else:
        out = fn(data, axis=axis)
    out = out.astype(np.int64, copy=False)
    return np.expand_dims(out, axis) if node.attrs.get("keepdims", 1) else out


def _flip(x, axis):
    return F.flip(x, axis) if is_var(x) else np.flip(arr(x), axis)


def _shift_right(x, axis, fill):
    """``x`` moved one step along ``axis``, ``fill`` entering first and the last leaving."""
    n, ndim = arr(x).shape[axis], arr(x).ndim
    widths = [(1, 0) if k == axis else (0, 0) for k in range(ndim)]
    keep = tuple(slice(0, n) if k == axis else slice(None) for k in range(ndim))
    if is_var(x):
        return F.get_item(F.pad(x, widths, constant_values=fill), keep)
    return np.pad(arr(x), widths, constant_values=fill)[keep]


@op("CumSum", "CumProd")
def _cumulative(node, args, module):
    """``exclusive`` combines what comes before each element; ``reverse`` runs from the
    end.  The result keeps the input's dtype (NumPy would widen int32 to int64)."""
    x, axis = args[0], int(scalar(args[1]))
    dtype, reverse = arr(x).dtype, node.attrs.get("reverse", 0)
    summing = node.op == "CumSum"
    axis %= max(arr(x).ndim, 1)
    if reverse:
        x = _flip(x, axis)
    if node.attrs.get("exclusive", 0):
        x = _shift_right(x, axis, 0 if summing else 1)
    if is_var(x) and dtype.kind == "f":
        out = as_dtype((F.cumsum if summing else F.cumprod)(x, axis), dtype)
    else:
        out = _plain(x, (np.cumsum if summing else np.cumprod)(arr(x), axis, dtype=dtype))
    return _flip(out, axis) if reverse else out


from lezero.onnx import import_shape  # noqa: E402,F401  (registers the shape operators)
from lezero.onnx import import_nn  # noqa: E402,F401  (registers the network operators)
from lezero.onnx import import_more  # noqa: E402,F401  (Mod, ScatterND, CastLike, ...)
