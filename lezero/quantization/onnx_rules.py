"""ONNX rules for the quantized operators: the QDQ form.

Every integer operator is written as DequantizeLinear on its integer inputs, the float
ONNX operator, and QuantizeLinear on its output (weights: int8 initializers with a
per-channel DequantizeLinear, axis 0; biases: int32 at the scale ``s_in * s_w``), which
is what onnxruntime's QDQ transformer fuses into QLinearConv / QLinearMatMul and its
integer kernels.  Operators that keep the scale (ReLU, max pooling) act on the integers
directly.

Signed integers that only meet a DequantizeLinear (weights, fake-quantized pairs) are
written shifted to uint8 (``q + 128`` with zero point ``z + 128``: the same real values).
onnxruntime's uint8 x int8 kernels saturate on x86 CPUs with AVX2 but no VNNI (pairs of
products summed in int16: an output 14 steps off on a grouped convolution, measured on an
AMD EPYC with onnxruntime 1.32), while its uint8 x uint8 kernels are exact on every CPU.  onnxruntime rounds in float where LeZero uses fixed-point multipliers, so its
outputs may differ by one quantization step at a tie (``quantization.export_onnx``
validates with that tolerance).  ``FakeQuantizeAffine`` (a QAT model) exports as a
QuantizeLinear / DequantizeLinear pair, as PyTorch exports fake quantization.
"""
import numpy as np

from lezero.onnx.registry import onnx_op
from lezero.quantization import reference as R

_QDQ = ("QuantizeLinear", "DequantizeLinear")


def _zp(ctx, value, dtype):
    return ctx.scalar(value, np.dtype(dtype))


def _q(ctx, x, scale, zp, dtype, outputs=None):
    return ctx.emit("QuantizeLinear", [x, ctx.scalar(scale, np.float32),
                                       _zp(ctx, zp, dtype)], outputs)


def _dq(ctx, q, scale, zp, dtype):
    return ctx.emit("DequantizeLinear", [q, ctx.scalar(scale, np.float32),
                                         _zp(ctx, zp, dtype)])


def _dq_input(ctx, node, k, scale, zp):
    return _dq(ctx, ctx.ins(node)[k], scale, zp, ctx.dtype(node.inputs[k]))


def as_uint8(q, zero_point):
    """``(q, zero_point)`` of int8 values as uint8 (both shifted by 128: the same real
    values ``scale * (q - zero_point)``); uint8 ones pass through."""
    q, zero_point = np.asarray(q), np.asarray(zero_point)
    if q.dtype == np.uint8:
        return q, zero_point.astype(np.uint8)
    return ((q.astype(np.int16) + 128).astype(np.uint8),
            (zero_point.astype(np.int16) + 128).astype(np.uint8))


def _weight_and_bias(ctx, a):
    """DequantizeLinear of the integer weight (per channel, as uint8) and of the int32
    bias."""
    w_q, w_zp = as_uint8(a["weight"], a["w_zp"])
    w = ctx.emit("DequantizeLinear", [ctx.const(w_q, "w_uint8"),
                                      ctx.const(a["w_scale"], "w_scale"),
                                      ctx.const(w_zp, "w_zp")], axis=0)
    acc_scale = (np.float32(a["in_scale"]) * a["w_scale"]).astype(np.float32)
    b = ctx.emit("DequantizeLinear", [ctx.const(a["bias_q"], "b_int32"),
                                      ctx.const(acc_scale, "b_scale"),
                                      ctx.const(np.zeros(acc_scale.shape, np.int32), "b_zp")],
                 axis=0)
    return w, b


def _requantize(ctx, node, y, a):
    if a["relu"]:
        y = ctx.emit("Relu", [y])
    _q(ctx, y, a["out_scale"], a["out_zp"], a["dtype"], node.outputs)


@onnx_op("QuantizePerTensor", opset=13, emits=("QuantizeLinear",))
def _quantize(ctx, node):
    a = node.attrs
    y = _q(ctx, ctx.ins(node)[0], a["scale"], a["zero_point"], a["dtype"])
    info = np.iinfo(a["dtype"])
    if (a["qmin"], a["qmax"]) != (info.min, info.max):
        y = ctx.emit("Clip", [y, _zp(ctx, a["qmin"], a["dtype"]),
                              _zp(ctx, a["qmax"], a["dtype"])])
    ctx.emit("Identity", [y], node.outputs)


@onnx_op("DequantizePerTensor", opset=13, emits=("DequantizeLinear",))
def _dequantize(ctx, node):
    a = node.attrs
    ctx.emit("DequantizeLinear", [ctx.ins(node)[0], ctx.scalar(a["scale"], np.float32),
                                  _zp(ctx, a["zero_point"], ctx.dtype(node.inputs[0]))],
             node.outputs)


@onnx_op("QuantizedLinear", opset=13, emits=_QDQ + ("Gemm", "MatMul", "Add", "Relu"))
def _qlinear(ctx, node):
    a = node.attrs
    x = _dq_input(ctx, node, 0, a["in_scale"], a["in_zp"])
    w, b = _weight_and_bias(ctx, a)
    if len(ctx.shape(node.inputs[0])) == 2:
        y = ctx.emit("Gemm", [x, w, b], transB=1)
    else:
        y = ctx.emit("Add", [ctx.emit("MatMul", [x, ctx.emit("Transpose", [w],
                                                             perm=[1, 0])]), b])
    _requantize(ctx, node, y, a)


@onnx_op("QuantizedConv2d", opset=13, emits=_QDQ + ("Conv", "Relu"))
def _qconv(ctx, node):
    a = node.attrs
    x = _dq_input(ctx, node, 0, a["in_scale"], a["in_zp"])
    w, b = _weight_and_bias(ctx, a)
    (ph, pw) = a["padding"]
    y = ctx.emit("Conv", [x, w, b], kernel_shape=list(a["kernel"]),
                 strides=list(a["stride"]), pads=[ph, pw, ph, pw],
                 dilations=list(a["dilation"]), group=int(a["groups"]))
    _requantize(ctx, node, y, a)


@onnx_op("QuantizedReLU", opset=13, emits=("Max", "Min"))
def _qrelu(ctx, node):
    a, dtype = node.attrs, ctx.dtype(node.inputs[0])
    y = ctx.emit("Max", [ctx.ins(node)[0], _zp(ctx, a["zero_point"], dtype)])
    if a["upper"] is not None:
        y = ctx.emit("Min", [y, _zp(ctx, a["upper"], dtype)])
    ctx.emit("Identity", [y], node.outputs)


def _window(a):
    (ph, pw) = a["padding"]
    return dict(kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
                pads=[ph, pw, ph, pw], ceil_mode=int(a["ceil_mode"]))


@onnx_op("QuantizedMaxPool2d", opset=12, emits=("MaxPool",))
def _qmax_pool(ctx, node):
    ctx.emit("MaxPool", [ctx.ins(node)[0]], node.outputs,
             dilations=list(node.attrs["dilation"]), **_window(node.attrs))


def _mean_pool(ctx, node, op, **attrs):
    """Average pooling keeps the scale, which then cancels: DQ/Q with scale 1."""
    a, dtype = node.attrs, ctx.dtype(node.inputs[0])
    x = _dq(ctx, ctx.ins(node)[0], 1.0, a.get("zero_point", 0), dtype)
    _q(ctx, ctx.emit(op, [x], **attrs), 1.0, a.get("zero_point", 0), dtype, node.outputs)


@onnx_op("QuantizedAvgPool2d", opset=13, emits=_QDQ + ("AveragePool",))
def _qavg_pool(ctx, node):
    a = node.attrs
    if a["divisor_override"]:
        ctx.fail(node, "divisor_override has no ONNX AveragePool form")
    h, w = ctx.shape(node.inputs[0])[2:]
    floor = R.geometry((h, w), a["kernel_size"], a["stride"], a["padding"])
    if a["ceil_mode"] and tuple(floor[8:]) != tuple(ctx.shape(node.outputs[0])[2:]):
        # onnxruntime counts the overhang of a ceil_mode window, PyTorch does not
        ctx.fail(node, "average pooling whose ceil_mode adds windows (PyTorch and ONNX "
                 "divide those by different counts)")
    _mean_pool(ctx, node, "AveragePool", count_include_pad=int(a["count_include_pad"]),
               **_window(a))


@onnx_op("QuantizedAdaptiveAvgPool2d", opset=13, emits=_QDQ + ("GlobalAveragePool",
                                                             "AveragePool"))
def _qadaptive_avg_pool(ctx, node):
    size = node.attrs["output_size"]
    h, w = ctx.shape(node.inputs[0])[2:]
    if tuple(size) == (1, 1):
        _mean_pool(ctx, node, "GlobalAveragePool")
    elif h % size[0] or w % size[1]:
        ctx.fail(node, f"adaptive pooling from {(h, w)} to {tuple(size)} has unequal "
                 "windows, which no ONNX pooling operator computes")
    else:
        k = [h // size[0], w // size[1]]
        _mean_pool(ctx, node, "AveragePool", kernel_shape=k, strides=k)


@onnx_op("QuantizedAdd", "QuantizedMul", opset=13, emits=_QDQ + ("Add", "Mul", "Relu"))
def _qbinary(ctx, node):
    a = node.attrs
    x = _dq_input(ctx, node, 0, *a["a_qparams"])
    y = _dq_input(ctx, node, 1, *a["b_qparams"])
    out = ctx.emit("Add" if node.op == "QuantizedAdd" else "Mul", [x, y])
    if a["relu"]:
        out = ctx.emit("Relu", [out])
    _q(ctx, out, *a["out_qparams"], a["dtype"], node.outputs)


@onnx_op("QuantizedCat", opset=13, emits=_QDQ + ("Concat",))
def _qcat(ctx, node):
    a = node.attrs
    parts = [_dq_input(ctx, node, k, s, z) for k, (s, z) in enumerate(a["in_qparams"])]
    _q(ctx, ctx.emit("Concat", parts, axis=a["axis"]), *a["out_qparams"], a["dtype"],
       node.outputs)


@onnx_op("FakeQuantizeAffine", opset=13, emits=_QDQ + ("Clip",))
def _fake_quantize(ctx, node):
    _emit_fake_quantize(ctx, node, node.attrs)


def _emit_fake_quantize(ctx, node, a):
    lo, hi = a["quant_min"], a["quant_max"]
    zp = np.asarray(a["zero_point"])
    if lo < 0:                 # a signed range, written as uint8 (see the module docstring)
        lo, hi, zp = lo + 128, hi + 128, zp.astype(np.int16) + 128
    dtype = np.dtype(np.uint8)
    scale = np.asarray(a["scale"], np.float32)
    zp = zp.astype(dtype)
    axis = {} if a["axis"] is None or scale.size == 1 else {"axis": int(a["axis"])}
    s_name = ctx.const(scale.reshape(-1) if axis else scale.reshape(()), "fq_scale")
    z_name = ctx.const(zp.reshape(-1) if axis else zp.reshape(()), "fq_zp")
    q = ctx.emit("QuantizeLinear", [ctx.ins(node)[0], s_name, z_name], **axis)
    info = np.iinfo(dtype)
    if (lo, hi) != (info.min, info.max):
        q = ctx.emit("Clip", [q, _zp(ctx, lo, dtype), _zp(ctx, hi, dtype)])
    ctx.emit("DequantizeLinear", [q, s_name, z_name], node.outputs, **axis)


@onnx_op("DynamicQuantizedLinear", opset=13, emits=("DynamicQuantizeLinear",
                                                    "MatMulInteger", "Cast", "Mul", "Add"))
def _dynamic_linear(ctx, node):
    a = node.attrs
    q, scale, zp = ctx.emit("DynamicQuantizeLinear", [ctx.ins(node)[0]], n_out=3)
    # The weight as uint8 (see the module docstring): onnxruntime's uint8 x uint8 product
    # is exact on every CPU.  w16 is the weight with its zero point (per output) taken off.
    weight = np.asarray(a["weight"])
    w_q, w_zp = as_uint8(weight, weight[:, 0].astype(np.int16) - a["w16"][:, 0])
    acc = ctx.emit("MatMulInteger", [q, ctx.const(np.ascontiguousarray(w_q.T), "w_uint8_t"),
                                     zp, ctx.const(w_zp, "w_zp")])
    y = ctx.emit("Cast", [acc], to=ctx.tensor_type(np.float32))
    y = ctx.emit("Mul", [y, ctx.emit("Mul", [scale, ctx.const(a["w_scale"], "w_scale")])])
    if a["bias"] is not None:
        y = ctx.emit("Add", [y, ctx.const(a["bias"], "bias")])
    ctx.emit("Identity", [y], node.outputs)


@onnx_op("FakeQuantizeLearnable", opset=13, emits=_QDQ + ("Clip",))
def _fake_quantize_learnable(ctx, node):
    """An LSQ model after training: the learned scale and zero point are constants."""
    a = node.attrs
    values = []
    for name in node.inputs[1:]:
        source = ctx.g.params.get(name)
        source = source.data if source is not None else ctx.g.consts.get(name)
        if source is None:
            ctx.fail(node, "the scale and zero point must be parameters or constants")
        values.append(np.asarray(source, np.float32))
    scale, zp = values
    lo, hi = a["quant_min"], a["quant_max"]
    fixed = dict(scale=scale, zero_point=np.clip(np.rint(zp), lo, hi).astype(np.int32),
                 quant_min=lo, quant_max=hi, axis=a["axis"])
    _emit_fake_quantize(ctx, node, fixed)
