"""ONNX rules for the fused recurrent layers (LSTM, GRU, Elman RNN).

LeZero runs a layer on a *packed* sequence (rows of all time steps stacked); ONNX's
recurrent operators take (T, B, I).  A layer whose every step has the same batch size
(a padded batch) exports: its input is the 3-D tensor the packing reshape started from
(or a reshape of the packed one), its output is unpacked again, and the 3-D result is
recorded as an alias so that the model's own reshape back to (T, B, H) becomes an
identity.  That also keeps the time and batch axes dynamic.  Gate blocks are reordered
from PyTorch's layout to ONNX's with Split/Concat nodes on the weights, so the
initializers keep the parameters' names and values.

A reverse layer is exported as a forward cell over the time-reversed input, its output
reversed back (two Slice nodes with step -1): OpenVINO (2026.4, CPU) merges a forward and
a reverse cell that read one tensor into a bidirectional one and then answers wrong for a
batch above 1, while this form runs the same on every runtime.
"""
import numpy as np

from lezero.onnx.registry import onnx_op

# PyTorch gate order -> ONNX gate order, as block indices
_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


def _reorder(ctx, w, gates):
    """Unsqueeze(Concat(blocks of w in ONNX's gate order), 0)."""
    order = _ORDER[gates]
    if order != list(range(len(order))):
        n = len(order)
        extra = {"num_outputs": n} if ctx.opset >= 18 else {}
        parts = ctx.emit("Split", [w], n_out=n, axis=0, **extra)
        w = ctx.emit("Concat", [parts[i] for i in order], axis=0)
    return ctx.emit("Unsqueeze", [w, ctx.ints([0])])


def _sequence_input(ctx, node, steps, feat):
    """The layer's input as (T, B, I)."""
    x = node.inputs[0]
    alias = ctx.aliases.get(x)
    if alias is not None:                  # the output of a layer below: its 3-D form
        return alias[0]
    src = ctx.producers.get(x)
    if src is not None and src.op == "Concatenate" and src.attrs["axis"] in (1, -1):
        parts = [ctx.aliases.get(v) for v in src.inputs]
        if all(parts):                     # both directions of a bidirectional layer below
            return ctx.emit("Concat", [p[0] for p in parts], axis=2)
    if src is not None and src.op == "Reshape":
        inner = src.inputs[0]
        a = ctx.shape(inner)
        if len(a) == 3 and a[0] == len(steps) and a[1] == steps[0][1]:
            return ctx.name(inner)
    if 0 in ctx.dynamic_consts(node) or "steps" in ctx.dynamic_attrs(node):
        ctx.fail(node, "a packed input whose (T, B) layout is not known with dynamic axes")
    return ctx.emit("Reshape", [ctx.name(x), ctx.ints([len(steps), steps[0][1], feat])])


def _time_reversed(ctx, t):
    """``t`` (T, ...) with its time axis reversed, for any T (Slice with step -1)."""
    return ctx.emit("Slice", [t, ctx.ints([-1]), ctx.ints([-2**63]), ctx.ints([0]),
                              ctx.ints([-1])])


def _state(ctx, node, k):
    """initial_h / initial_c: '' (zeros) for an all-zero constant, else Unsqueeze(s, 0)."""
    value = node.inputs[k]
    if ctx.g.values[value].kind == "const" and not np.any(ctx.g.consts[value]):
        ctx.claim(node, f"input {k}")
        return ""
    if k in ctx.dynamic_consts(node):
        ctx.fail(node, f"input {k} (an initial state) is a constant whose shape follows a "
                 "dynamic axis")
    return ctx.emit("Unsqueeze", [ctx.name(value), ctx.ints([0])])


def _recurrent(ctx, node, op_type, n_state, **attrs):
    steps = node.attrs["steps"]
    sizes = {b for _, b in steps}
    if len(sizes) != 1:
        ctx.fail(node, "a packed sequence of unequal lengths (only padded batches export)")
    reverse = len(steps) > 1 and steps[0][0] > steps[-1][0]
    names = ctx.ins(node)
    w_ih, w_hh = node.inputs[1 + n_state], node.inputs[2 + n_state]
    hidden = ctx.shape(w_hh)[1]
    x3 = _sequence_input(ctx, node, steps, ctx.shape(w_ih)[1])
    ctx.claim(node, "steps")
    states = [_state(ctx, node, 1 + k) for k in range(n_state)]
    W, R = _reorder(ctx, names[1 + n_state], op_type), _reorder(ctx, names[2 + n_state], op_type)
    B = ""
    if len(names) > 3 + n_state:
        b_ih = ctx.emit("Squeeze", [_reorder(ctx, names[3 + n_state], op_type), ctx.ints([0])])
        b_hh = ctx.emit("Squeeze", [_reorder(ctx, names[4 + n_state], op_type), ctx.ints([0])])
        B = ctx.emit("Unsqueeze", [ctx.emit("Concat", [b_ih, b_hh], axis=0), ctx.ints([0])])
    inputs = [_time_reversed(ctx, x3) if reverse else x3, W, R, B, ""] + states
    while inputs and inputs[-1] == "":
        inputs.pop()
    outs = ctx.emit(op_type, inputs, n_out=1 + n_state, hidden_size=int(hidden),
                    direction="forward", **attrs)
    y3 = ctx.emit("Squeeze", [outs[0], ctx.ints([1])])
    if reverse:
        y3 = _time_reversed(ctx, y3)
    ctx.emit("Reshape", [y3, ctx.ints([-1, int(hidden)])], [node.outputs[0]])
    (t_a, b_a) = len(steps), steps[0][1]
    other = ctx.other_attr(node, "steps") if ctx.other is not None else steps
    ctx.aliases[node.outputs[0]] = (y3, ((t_a, b_a, hidden), (len(other), other[0][1], hidden)))
    for k in range(n_state):
        ctx.emit("Squeeze", [outs[1 + k], ctx.ints([0])], [node.outputs[1 + k]])


@onnx_op("LSTMLayer", opset=14, emits=("LSTM", "Split", "Concat", "Squeeze", "Unsqueeze", "Slice"))
def _lstm(ctx, node):
    _recurrent(ctx, node, "LSTM", 2)


@onnx_op("GRULayer", opset=14, emits=("GRU", "Split", "Concat", "Squeeze", "Unsqueeze", "Slice"))
def _gru(ctx, node):
    _recurrent(ctx, node, "GRU", 1, linear_before_reset=1)


@onnx_op("ElmanLayer", opset=14, emits=("RNN", "Squeeze", "Unsqueeze", "Slice"))
def _rnn(ctx, node):
    act = "Relu" if node.attrs.get("relu") else "Tanh"
    _recurrent(ctx, node, "RNN", 1, activations=[act])
