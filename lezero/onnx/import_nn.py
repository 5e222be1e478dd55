"""ONNX network operators run with LeZero: products, convolution, normalization, softmax
and the recurrent layers (see import_ops).  MaxPool / AveragePool / LpPool live in
``import_pool``; recurrences the fused kernels do not compute are stepped in ``import_rnn``."""
import numpy as np

import lezero.functions as F
from lezero.onnx import import_rnn
from lezero.onnx.import_ops import arr, as_dtype, is_var, op, via_float32
from lezero.onnx.import_pool import auto_pads


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
    if at.get("transB", 0) and alpha == 1.0 and (c is None or beta == 1.0 and
                                                  arr(c).shape == arr(b).shape[:1]):
        return F.linear(a, b, c)                # weight (out, in), as nn.Linear keeps it
    y = F.matmul(a, F.transpose(b) if at.get("transB", 0) else b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y


@op("Einsum")
def _einsum(node, args, module):
    return via_float32(lambda *xs: F.einsum(node.attrs["equation"], *xs), *args)


def _geometry(node, x, w_shape):
    kernel = list(node.attrs.get("kernel_shape") or w_shape[2:])
    n = len(kernel)
    strides = list(node.attrs.get("strides", [1] * n))
    dilations = list(node.attrs.get("dilations", [1] * n))
    pads = auto_pads(node, arr(x).shape[2:], kernel, strides, dilations)
    return kernel, strides, dilations, pads


def _symmetric(x, pads, value):
    """x padded so the remaining padding is symmetric; returns (x, per-axis padding)."""
    if all(lo == hi for lo, hi in pads):
        return x, [lo for lo, _ in pads]
    extra = [(0, 0), (0, 0)] + [(0, hi - lo) if hi > lo else (lo - hi, 0) for lo, hi in pads]
    return F.pad(x, extra, constant_values=value), [min(lo, hi) for lo, hi in pads]


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@op("Conv")
def _conv(node, args, module):
    x, w = args[:2]
    b = args[2] if len(args) > 2 else None
    kernel, strides, dilations, pads = _geometry(node, x, arr(w).shape)
    x, padding = _symmetric(x, pads, 0.0)

    def conv(x, w, b):
        return _CONV[len(kernel)](x, w, b, stride=tuple(strides), padding=tuple(padding),
                                  dilation=tuple(dilations), groups=node.attrs.get("group", 1))
    return via_float32(conv, x, w, b, half=True)     # CPU kernels lack float16 convolution


def _transpose_spans(node, x_shape, strides, full):
    """Per spatial axis, the (start, stop) of ConvTranspose's output within the unpadded
    full output (length ``full``): ``pads`` crop it, ``output_padding`` extends it, and
    ``output_shape`` or ``auto_pad=SAME_*`` (output = input * stride) fix its length."""
    n = len(full)
    at = node.attrs
    extra = list(at.get("output_padding", [0] * n))
    mode = at.get("auto_pad", "NOTSET")
    target = list(at.get("output_shape", []))[-n:] if "output_shape" in at else None
    if target is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        target = [size * s for size, s in zip(x_shape[2:], strides)]
    if target is None:
        pads = [0] * 2 * n if mode == "VALID" else list(at.get("pads", [0] * 2 * n))
        return [(lo, f + e - hi) for lo, hi, f, e in zip(pads[:n], pads[n:], full, extra)]
    spans = []
    for f, e, out in zip(full, extra, target):
        total = f + e - out
        lo = total // 2 if mode == "SAME_UPPER" else total - total // 2
        spans.append((lo, lo + out))
    return spans


def _window(y, spans, full):
    """``y`` cut to ``spans`` along its spatial axes, zeros where a span leaves it."""
    widths = [(0, 0), (0, 0)] + [(max(-a, 0), max(b - f, 0)) for (a, b), f in zip(spans, full)]
    if any(w != (0, 0) for w in widths):
        y = F.pad(y, widths)
    index = (slice(None), slice(None)) + tuple(
        slice(a + lo, b + lo) for (a, b), (lo, _) in zip(spans, widths[2:]))
    return F.get_item(y, index)


@op("ConvTranspose")
def _conv_transpose(node, args, module):
    """LeZero's transposed convolution without padding, then cut to the output ONNX
    asks for (see ``_transpose_spans``); the bias is added last."""
    x, w = args[:2]
    b = args[2] if len(args) > 2 else None
    n = arr(w).ndim - 2
    strides = list(node.attrs.get("strides", [1] * n))
    dilations = list(node.attrs.get("dilations", [1] * n))
    groups = node.attrs.get("group", 1)
    y = _CONV_T[n](x, w, None, stride=tuple(strides), padding=0, groups=groups,
                   dilation=tuple(dilations))
    full = list(y.shape[2:])
    spans = _transpose_spans(node, arr(x).shape, strides, full)
    if any(a != 0 or b_ != f for (a, b_), f in zip(spans, full)):
        y = _window(y, spans, full)
    return y if b is None else y + _channel(b, n + 2)


@op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node, args, module):
    x = args[0]
    axes = tuple(range(2, arr(x).ndim))
    fn = F.mean if node.op == "GlobalAveragePool" else F.max
    return fn(x, axis=axes, keepdims=True)


def _channel(v, ndim):
    """A per-channel vector shaped to broadcast over (N, C, ...)."""
    shape = (1, -1) + (1,) * (ndim - 2)
    return F.reshape(v, shape) if is_var(v) else np.reshape(arr(v), shape)


def _batch_norm_training(node, x, scale, bias, mean, var):
    """Normalised by the batch's statistics (biased variance); also the running
    statistics updated with ``momentum`` (ONNX: new = old * momentum + batch * (1 -
    momentum))."""
    ndim, eps = arr(x).ndim, node.attrs.get("epsilon", 1e-5)
    momentum = node.attrs.get("momentum", 0.9)
    axes = (0,) + tuple(range(2, ndim))
    batch_mean = F.mean(x, axis=axes, keepdims=True)
    centred = x - batch_mean
    batch_var = F.mean(centred * centred, axis=axes, keepdims=True)
    y = centred / F.sqrt(batch_var + eps) * _channel(scale, ndim) + _channel(bias, ndim)
    flat_mean, flat_var = F.reshape(batch_mean, (-1,)), F.reshape(batch_var, (-1,))
    running_mean = mean * momentum + flat_mean * (1 - momentum)
    running_var = var * momentum + flat_var * (1 - momentum)
    outs = (y, running_mean, running_var)
    if len(node.outputs) > 3:        # before opset 14: also the batch's own statistics
        outs += (flat_mean, flat_var)
    return outs


@op("BatchNormalization")
def _batch_norm(node, args, module):
    x, scale, bias, mean, var = args[:5]
    if node.attrs.get("training_mode", 0) or (module.opset < 14 and len(node.outputs) > 1):
        return _batch_norm_training(node, x, scale, bias, mean, var)
    return F.batch_norm(x, arr(mean), arr(var), scale, bias, training=False,
                        eps=node.attrs.get("epsilon", 1e-5))


@op("InstanceNormalization")
def _instance_norm(node, args, module):
    x, scale, bias = args
    return F.instance_norm(x, weight=scale, bias=bias, eps=node.attrs.get("epsilon", 1e-5))


def _layer_norm_stats(node, x, scale, bias, axis):
    """LayerNormalization with its ``Mean`` and ``InvStdDev`` outputs (over the axes
    from ``axis`` on, kept as size 1), computed in float32 unless ``stash_type`` says
    otherwise (never narrower than the input) and returned in the input's dtype, as ONNX's
    reference does."""
    dtype, eps = arr(x).dtype, node.attrs.get("epsilon", 1e-5)
    stash = dtype
    if node.attrs.get("stash_type", 1) == 1 and dtype.itemsize < 4:
        stash = np.dtype(np.float32)
    xs = as_dtype(x, stash)
    axes = tuple(range(axis, arr(x).ndim))
    mean = F.mean(xs, axis=axes, keepdims=True)
    centred = xs - mean
    inv_std = 1.0 / F.sqrt(F.mean(centred * centred, axis=axes, keepdims=True) + eps)
    y = as_dtype(centred * inv_std, dtype) * scale
    if bias is not None:
        y = y + bias
    return y, as_dtype(mean, dtype), as_dtype(inv_std, dtype)


@op("LayerNormalization")
def _layer_norm(node, args, module):
    x, scale = args[:2]
    bias = args[2] if len(args) > 2 else None
    axis = node.attrs.get("axis", -1) % arr(x).ndim
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        outs = _layer_norm_stats(node, x, scale, bias, axis)
        return outs[:len(node.outputs)]
    return F.layer_norm(x, arr(x).shape[axis:], scale, bias,
                        eps=node.attrs.get("epsilon", 1e-5))


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


def _rnn_fn(node, kind):
    if kind != "RNN":
        return _FUSED[kind]
    acts = [s.lower() for s in node.attrs.get("activations", ["Tanh"])]
    return F.rnn_tanh if acts[0] == "tanh" else F.rnn_relu    # others: import_rnn


@op("LSTM", "GRU", "RNN")
def _recurrent(node, args, module):
    kind = node.op
    if import_rnn.needs_steps(node, args):
        return import_rnn.run_steps(node, args)
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


from lezero.onnx import import_pool  # noqa: E402,F401  (MaxPool, AveragePool)
from lezero.onnx import import_extra  # noqa: E402,F401  (TopK, OneHot, GatherND, ...)
