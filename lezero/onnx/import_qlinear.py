"""ONNX integer and quantized products run with LeZero: MatMulInteger, ConvInteger,
QLinearMatMul and QLinearConv (registered into ``import_ops.IMPORT_OPS``).

The integer products are exact: the zero points are subtracted in int32 and the
products accumulated in int64 (matmul) or float64 (convolution, by LeZero's ``Conv``
import, exact while every sum stays below 2**53) before the int32 result.  The QLinear
operators then requantize as the ONNX reference does: ``saturate(round_half_even(acc *
(x_scale * w_scale / y_scale)) + y_zero_point)``.  Inputs are 8-bit integers (int8,
uint8); anything else is an error naming the operator and the dtype.  None of these
are differentiable (their inputs are integers).
"""
import numpy as np

from lezero.onnx.import_ops import IMPORT_OPS, arr, op

_EIGHT_BIT = (np.dtype(np.int8), np.dtype(np.uint8))


def _integer(op_name, role, x):
    """``x`` (8-bit) as an int32 NumPy array."""
    data = np.asarray(arr(x))
    if data.dtype not in _EIGHT_BIT:
        raise ValueError(f"{op_name}: {role} has dtype {data.dtype}; int8 and uint8 are "
                         "supported")
    return data.astype(np.int32)


def _zero_point(op_name, role, zp, axis_len, axis, ndim):
    """Zero point ``zp`` (None, scalar or 1-D of ``axis_len``) shaped to broadcast along
    ``axis`` of an ``ndim``-D operand."""
    if zp is None:
        return np.int32(0)
    data = _integer(op_name, f"{role} zero point", zp)
    if data.size == 1:
        return data.reshape(())
    if data.ndim != 1 or data.shape[0] != axis_len:
        raise ValueError(f"{op_name}: {role} zero point of shape {data.shape} is neither a "
                         f"scalar nor 1-D of length {axis_len}")
    shape = [1] * ndim
    shape[axis] = axis_len
    return data.reshape(shape)


def _centered(op_name, role, x, zp, axis):
    """``x - zero_point`` in int32; a 1-D zero point runs along ``axis``."""
    data = _integer(op_name, role, x)
    axis %= max(data.ndim, 1)
    length = data.shape[axis] if data.ndim else 1
    return data - _zero_point(op_name, role, zp, length, axis, max(data.ndim, 1))


def _optional(args, k):
    return args[k] if len(args) > k else None


def _matmul_int(op_name, a, a_zp, b, b_zp):
    """(a - a_zp) @ (b - b_zp) exactly, as int32; a's zero point runs along its rows,
    b's along its columns."""
    if np.ndim(arr(a)) < 1 or np.ndim(arr(b)) < 1:
        raise ValueError(f"{op_name}: inputs must have at least one dimension")
    left = _centered(op_name, "A", a, a_zp, -2 if np.ndim(arr(a)) > 1 else 0)
    right = _centered(op_name, "B", b, b_zp, -1)
    return np.matmul(left.astype(np.int64), right.astype(np.int64)).astype(np.int32)


def _conv_int(op_name, node, module, x, x_zp, w, w_zp):
    """The exact int32 convolution of the centered operands (``Conv``'s attributes)."""
    xs = _integer(op_name, "x", x)
    if x_zp is not None and np.asarray(arr(x_zp)).size != 1:
        raise ValueError(f"{op_name}: x zero point must be a scalar, got shape "
                         f"{np.shape(arr(x_zp))}")
    left = xs - _zero_point(op_name, "x", x_zp, 1, 0, 1).reshape(())
    right = _centered(op_name, "w", w, w_zp, 0)
    out = IMPORT_OPS["Conv"](node, [left.astype(np.float64), right.astype(np.float64)],
                             module)
    return np.rint(np.asarray(arr(out), dtype=np.float64)).astype(np.int64)


@op("MatMulInteger")
def _matmul_integer(node, args, module):
    a, b = args[:2]
    return _matmul_int("MatMulInteger", a, _optional(args, 2), b, _optional(args, 3))


@op("ConvInteger")
def _conv_integer(node, args, module):
    x, w = args[:2]
    out = _conv_int("ConvInteger", node, module, x, _optional(args, 2), w, _optional(args, 3))
    return out.astype(np.int32)


def _scale(op_name, role, s):
    data = np.asarray(arr(s))
    if data.dtype.kind != "f":
        raise ValueError(f"{op_name}: {role} scale has dtype {data.dtype}; a float is "
                         "required")
    return data


def _requantize(op_name, acc, multiplier, y_zp):
    """``saturate(rint(acc * multiplier) + y_zp)`` in y_zp's 8-bit dtype."""
    zp = np.asarray(arr(y_zp))
    if zp.dtype not in _EIGHT_BIT:
        raise ValueError(f"{op_name}: y zero point has dtype {zp.dtype}; int8 and uint8 "
                         "are supported")
    values = np.rint(acc * multiplier.astype(np.float64)) + zp.astype(np.float64)
    info = np.iinfo(zp.dtype)
    return np.clip(values, info.min, info.max).astype(zp.dtype)


@op("QLinearMatMul")
def _qlinear_matmul(node, args, module):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = args
    acc = _matmul_int("QLinearMatMul", a, a_zp, b, b_zp)
    multiplier = (_scale("QLinearMatMul", "a", a_s) * _scale("QLinearMatMul", "b", b_s)
                  / _scale("QLinearMatMul", "y", y_s))
    return _requantize("QLinearMatMul", acc, multiplier, y_zp)


@op("QLinearConv")
def _qlinear_conv(node, args, module):
    """The int32 bias (optional ninth input) is added to the accumulator; a 1-D
    ``w_scale`` is per output channel."""
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = args[:8]
    acc = _conv_int("QLinearConv", node, module, x, x_zp, w, w_zp)
    bias = _optional(args, 8)
    if bias is not None:
        b = np.asarray(arr(bias))
        if b.dtype != np.int32 or b.shape != (acc.shape[1],):
            raise ValueError(f"QLinearConv: bias must be int32 of shape ({acc.shape[1]},), "
                             f"got {b.dtype} {b.shape}")
        acc = acc + b.reshape((1, -1) + (1,) * (acc.ndim - 2))
    ws = _scale("QLinearConv", "w", w_s)
    if ws.size > 1:
        if ws.shape != (acc.shape[1],):
            raise ValueError(f"QLinearConv: w scale of shape {ws.shape} is neither a scalar "
                             f"nor 1-D of length {acc.shape[1]} (output channels)")
        ws = ws.reshape((1, -1) + (1,) * (acc.ndim - 2))
    multiplier = _scale("QLinearConv", "x", x_s) * ws / _scale("QLinearConv", "y", y_s)
    return _requantize("QLinearConv", acc, multiplier, y_zp)
