"""ONNX linear quantization run with LeZero: QuantizeLinear, DequantizeLinear and
DynamicQuantizeLinear (registered into ``import_ops.IMPORT_OPS``).

Per-tensor (scalar scale), per-axis (1-D scale along ``axis``) and blocked (``block_size``)
scales are supported for 8- and 16-bit integers.  float8, int4, int2 and float4 have no
NumPy dtype LeZero computes with: they raise an error naming the operator and the dtype.
Quantized values are integer arrays (not differentiable); DequantizeLinear with a scale
that is a Parameter is differentiable in that scale.
"""
import numpy as np

import lezero.functions as F
from lezero.onnx.import_ops import arr, is_var, op

_INTEGERS = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}
_OUTPUT_DTYPES = {2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32}


def _check_integer(op_name, dtype):
    if np.dtype(dtype) not in _INTEGERS:
        raise ValueError(f"{op_name}: quantized dtype {dtype} is not supported (int8, uint8, "
                         "int16, uint16, int32; float8/int4/int2/float4 are not)")
    return np.dtype(dtype)


def _broadcast_param(op_name, p, x_shape, axis, block_size):
    """Scale or zero point ``p`` (array or Variable) shaped to broadcast against x."""
    shape = arr(p).shape
    ndim = len(x_shape)
    axis = axis % max(ndim, 1)
    reshape = F.reshape if is_var(p) else np.reshape
    if block_size:
        if len(shape) != ndim or -(-x_shape[axis] // block_size) != shape[axis]:
            raise ValueError(f"{op_name}: blocked scale of shape {shape} does not match "
                             f"input {tuple(x_shape)}, axis {axis}, block_size {block_size}")
        idx = np.arange(x_shape[axis]) // block_size
        return F.take(p, idx, axis=axis) if is_var(p) else np.take(p, idx, axis=axis)
    if len(shape) == 0 or (len(shape) == 1 and shape[0] == 1):
        return reshape(p, ())
    if len(shape) != 1 or shape[0] != x_shape[axis]:
        raise ValueError(f"{op_name}: scale of shape {shape} is neither a scalar nor 1-D of "
                         f"length {x_shape[axis]} (input {tuple(x_shape)}, axis {axis})")
    target = [1] * ndim
    target[axis] = shape[0]
    return reshape(p, tuple(target))


def _params(node, args):
    axis = node.attrs.get("axis", 1)
    block = node.attrs.get("block_size", 0)
    zero = args[2] if len(args) > 2 else None
    return args[1], zero, axis, block


def _saturate(values, dtype):
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


@op("QuantizeLinear")
def _quantize(node, args, module):
    """``saturate(round_half_even(x / scale) + zero_point)``."""
    x = arr(args[0])
    scale, zero, axis, block = _params(node, args)
    if node.attrs.get("precision", 0):
        raise ValueError("QuantizeLinear: attribute precision is not supported")
    if zero is not None:
        dtype = arr(zero).dtype
    else:
        code = node.attrs.get("output_dtype", 2)
        if code not in _OUTPUT_DTYPES:
            from lezero.onnx._deps import onnx
            name = onnx().TensorProto.DataType.Name(code) if code in \
                onnx().TensorProto.DataType.values() else f"code {code}"
            raise ValueError(f"QuantizeLinear: output_dtype {name} is not supported "
                             "(int8, uint8, int16, uint16, int32)")
        dtype = _OUTPUT_DTYPES[code]
    dtype = _check_integer("QuantizeLinear", dtype)
    s = _broadcast_param("QuantizeLinear", arr(scale), x.shape, axis, block)
    q = np.rint(x / s)
    if zero is not None:
        q = q + _broadcast_param("QuantizeLinear", arr(zero), x.shape, axis, block)
    return _saturate(q, dtype)


@op("DequantizeLinear")
def _dequantize(node, args, module):
    """``(x - zero_point) * scale``, in the scale's dtype."""
    x = arr(args[0])
    _check_integer("DequantizeLinear", x.dtype)
    scale, zero, axis, block = _params(node, args)
    dtype = arr(scale).dtype
    if node.attrs.get("output_dtype", 0) not in (0, 1, 10, 11):
        raise ValueError(f"DequantizeLinear: output_dtype {node.attrs['output_dtype']} is "
                         "not supported")
    centered = x.astype(np.float64)
    if zero is not None:
        _check_integer("DequantizeLinear", arr(zero).dtype)
        centered = centered - _broadcast_param("DequantizeLinear", arr(zero), x.shape, axis,
                                               block)
    s = _broadcast_param("DequantizeLinear", scale, x.shape, axis, block)
    if is_var(s):
        return F.mul(centered.astype(dtype), s)
    return (centered * s).astype(dtype)


@op("DynamicQuantizeLinear")
def _dynamic_quantize(node, args, module):
    """uint8 quantization whose range spans [min(x, 0), max(x, 0)]: (y, scale, zero)."""
    x = arr(args[0]).astype(np.float32)
    lo, hi = min(float(x.min(initial=0.0)), 0.0), max(float(x.max(initial=0.0)), 0.0)
    scale = np.float32((hi - lo) / 255.0)
    if scale == 0:
        scale = np.float32(1.0)
    zero = _saturate(np.rint(np.float32(0.0) - np.float32(lo) / scale), np.uint8)
    y = _saturate(np.rint(x / scale) + zero, np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zero, np.uint8)
