"""ONNX network operators run with LeZero: products, convolution, pooling, normalization,
softmax and the recurrent layers (see import_ops)."""
import numpy as np

import lezero.functions as F
from lezero.onnx.import_ops import arr, is_var, op


@op("MatMul")
def _matmul(node, args, module):
    a, b = args
    return F.matmul(a, b) if is_var(a) or is_var(b) else np.matmul(arr(a), arr(b))


@op("Gemm")
def _gemm(node, args, module):
    a, b = args[:2]
    c = args[2] if len(args) > 2 else None
    at = node.attrs
    alpha, beta = at.get("alpha", 1.0), at.get("beta", 1.0)
    if at.get("transA", 0):
        a = F.transpose(a)
    if at.get("transB", 0) and alpha == 1.0 and (c is None or beta == 1.0):
        return F.linear(a, b, c)                # weight (out, in), as nn.Linear keeps it
    y = F.matmul(a, F.transpose(b) if at.get("transB", 0) else b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y


@op("Einsum")
def _einsum(node, args, module):
    return F.einsum(node.attrs["equation"], *args)


def _pads(node, x_shape, kernel, strides, dilations):
    """(begin, end) padding per spatial axis, from ``pads`` or ``auto_pad``."""
    n = len(kernel)
    mode = node.attrs.get("auto_pad", "NOTSET")
    if mode in ("NOTSET", "VALID"):
        pads = list(node.attrs.get("pads", [0] * 2 * n)) if mode == "NOTSET" else [0] * 2 * n
        return list(zip(pads[:n], pads[n:]))
    out = []
    for size, k, s, d in zip(x_shape[2:], kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        lo = total // 2 if mode == "SAME_UPPER" else total - total // 2
        out.append((lo, total - lo))
    return out


def _geometry(node, x, w_shape=None):
    kernel = list(node.attrs.get("kernel_shape") or w_shape[2:])
    n = len(kernel)
    strides = list(node.attrs.get("strides", [1] * n))
    dilations = list(node.attrs.get("dilations", [1] * n))
    pads = _pads(node, arr(x).shape, kernel, strides, dilations)
    return kernel, strides, dilations, pads


def _symmetric(x, pads, value):
    """x padded so the remaining padding is symmetric; returns (x, per-axis padding)."""
    if all(lo == hi for lo, hi in pads):
        return x, [lo for lo, _ in pads]
    extra = [(0, 0), (0, 0)] + [(0, hi - lo) if hi > lo else (lo - hi, 0) for lo, hi in pads]
    return F.pad(x, extra, constant_values=value), [min(lo, hi) for lo, hi in pads]


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVGPOOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@op("Conv")
def _conv(node, args, module):
    x, w = args[:2]
    b = args[2] if len(args) > 2 else None
    kernel, strides, dilations, pads = _geometry(node, x, arr(w).shape)
    x, padding = _symmetric(x, pads, 0.0)
    return _CONV[len(kernel)](x, w, b, stride=tuple(strides), padding=tuple(padding),
                              dilation=tuple(dilations), groups=node.attrs.get("group", 1))


@op("ConvTranspose")
def _conv_transpose(node, args, module):
    x, w = args[:2]
    b = args[2] if len(args) > 2 else None
    if "output_shape" in node.attrs:
        raise ValueError("ConvTranspose with output_shape is not supported (give pads)")
    kernel, strides, dilations, pads = _geometry(node, x, arr(w).shape)
    if any(lo != hi for lo, hi in pads):
        raise ValueError(f"ConvTranspose with asymmetric pads {pads} is not supported")
    out_pad = tuple(node.attrs.get("output_padding", [0] * len(kernel)))
    return _CONV_T[len(kernel)](x, w, b, stride=tuple(strides),
                                padding=tuple(lo for lo, _ in pads), output_padding=out_pad,
                                groups=node.attrs.get("group", 1), dilation=tuple(dilations))


@op("MaxPool")
def _max_pool(node, args, module):
    x = args[0]
    kernel, strides, dilations, pads = _geometry(node, x)
    x, padding = _symmetric(x, pads, -np.inf)
    y = _MAXPOOL[len(kernel)](x, tuple(kernel), tuple(strides), tuple(padding),
                              tuple(dilations), ceil_mode=bool(node.attrs.get("ceil_mode", 0)))
    return (y, None) if len(node.outputs) > 1 else y


@op("AveragePool")
def _avg_pool(node, args, module):
    x = args[0]
    kernel, strides, _, pads = _geometry(node, x)
    include = bool(node.attrs.get("count_include_pad", 0))
    if any(lo != hi for lo, hi in pads):
        if not include:
            raise ValueError("AveragePool with asymmetric pads and count_include_pad=0")
        x, pads = _symmetric(x, pads, 0.0)
    else:
        pads = [lo for lo, _ in pads]
    return _AVGPOOL[len(kernel)](x, tuple(kernel), tuple(strides), tuple(pads),
                                 ceil_mode=bool(node.attrs.get("ceil_mode", 0)),
                                 count_include_pad=include)


@op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node, args, module):
    x = args[0]
    axes = tuple(range(2, arr(x).ndim))
    fn = F.mean if node.op == "GlobalAveragePool" else F.max
    return fn(x, axis=axes, keepdims=True)


@op("BatchNormalization")
def _batch_norm(node, args, module):
    x, scale, bias, mean, var = args[:5]
    if node.attrs.get("training_mode", 0):
        raise ValueError("BatchNormalization in training mode is not supported")
    return F.batch_norm(x, arr(mean), arr(var), scale, bias, training=False,
                        eps=node.attrs.get("epsilon", 1e-5))


@op("InstanceNormalization")
def _instance_norm(node, args, module):
    x, scale, bias = args
    return F.instance_norm(x, weight=scale, bias=bias, eps=node.attrs.get("epsilon", 1e-5))


@op("LayerNormalization")
def _layer_norm(node, args, module):
    x, scale = args[:2]
    bias = args[2] if len(args) > 2 else None
    axis = node.attrs.get("axis", -1) % arr(x).ndim
    y = F.layer_norm(x, arr(x).shape[axis:], scale, bias, eps=node.attrs.get("epsilon", 1e-5))
    return (y,) + (None,) * (len(node.outputs) - 1)


@op("Softmax", "LogSoftmax")
def _softmax(node, args, module):
    x = args[0]
    fn = F.softmax if node.op == "Softmax" else F.log_softmax
    if module.opset >= 13:
        return fn(x, axis=node.attrs.get("axis", -1))
    axis = node.attrs.get("axis", 1) % arr(x).ndim        # before opset 13: flatten to 2-D
    shape = arr(x).shape
    flat = F.reshape(x, (int(np.prod(shape[:axis])), -1))
    return F.reshape(fn(flat, axis=-1), shape)


# ----- recurrent layers ----------------------------------------------------------------

# ONNX gate blocks, in the order PyTorch's (and LeZero's) weights keep them
_TO_TORCH = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2], "RNN": [0]}
_FUSED = {"LSTM": F.lstm, "GRU": F.gru}


def _gates(w, kind, hidden):
    blocks = [F.get_item(w, slice(k * hidden, (k + 1) * hidden)) for k in _TO_TORCH[kind]]
    return blocks[0] if len(blocks) == 1 else F.concatenate(blocks, axis=0)


def _check_recurrent(node, args, kind):
    a = node.attrs
    if a.get("clip") is not None or a.get("input_forget", 0):
        raise ValueError(f"{kind} with clip or input_forget is not supported")
    if kind == "GRU" and not a.get("linear_before_reset", 0):
        raise ValueError("GRU with linear_before_reset=0 is not supported (PyTorch's GRU "
                         "exports linear_before_reset=1)")
    if len(args) > 4 and args[4] is not None:
        lens = np.asarray(arr(args[4])).reshape(-1)
        if lens.size and not (lens == lens.max()).all():
            raise ValueError(f"{kind} with unequal sequence_lens is not supported")
    if kind == "LSTM" and len(args) > 7 and args[7] is not None:
        raise ValueError("LSTM with peepholes (input P) is not supported")


def _rnn_fn(node, kind):
    if kind != "RNN":
        return _FUSED[kind]
    acts = [s.lower() for s in node.attrs.get("activations", ["Tanh"])]
    if acts[0] not in ("tanh", "relu"):
        raise ValueError(f"RNN activation {acts[0]!r} is not supported")
    return F.rnn_tanh if acts[0] == "tanh" else F.rnn_relu


@op("LSTM", "GRU", "RNN")
def _recurrent(node, args, module):
    kind = node.op
    _check_recurrent(node, args, kind)
    a = node.attrs
    x, w, r = args[:3]
    b = args[3] if len(args) > 3 else None
    hidden, direction = int(a["hidden_size"]), a.get("direction", "forward")
    dirs, batch_first = 2 if direction == "bidirectional" else 1, bool(a.get("layout", 0))
    params = []
    for d in range(dirs):
        params += [_gates(w[d], kind, hidden), _gates(r[d], kind, hidden)]
        if b is not None:
            g = len(_TO_TORCH[kind]) * hidden
            params += [_gates(F.get_item(b[d], slice(0, g)), kind, hidden),
                       _gates(F.get_item(b[d], slice(g, 2 * g)), kind, hidden)]
    states = [args[k] if len(args) > k else None for k in ((5, 6) if kind == "LSTM" else (5,))]
    if batch_first:
        states = [None if s is None else F.transpose(s, (1, 0, 2)) for s in states]
    hx = None
    if any(s is not None for s in states):
        hx = tuple(states) if kind == "LSTM" else states[0]
    time_axis = 1 if batch_first else 0
    if direction == "reverse":
        x = F.flip(x, time_axis)
    out, h = _rnn_fn(node, kind)(x, hx, params, has_biases=b is not None, training=False,
                                 bidirectional=dirs == 2, batch_first=batch_first)
    if direction == "reverse":
        out = F.flip(out, time_axis)
    return _recurrent_outputs(out, h, kind, dirs, hidden, batch_first)


def _recurrent_outputs(out, h, kind, dirs, hidden, batch_first):
    t_b = out.shape[:2]
    y = F.reshape(out, t_b + (dirs, hidden))
    y = F.transpose(y, (0, 2, 1, 3)) if not batch_first else y
    finals = list(h) if kind == "LSTM" else [h]
    if batch_first:
        finals = [F.transpose(s, (1, 0, 2)) for s in finals]
    return tuple([y] + finals)
