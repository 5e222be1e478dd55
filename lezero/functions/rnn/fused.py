"""Full-sequence recurrent operators: ``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu``.

They take what ``torch.nn.LSTM`` (and friends) hand to their fused kernel: the input
(padded, or a ``PackedSequence``), the initial state, and the flat list of weights in
PyTorch's order -- per layer, per direction: ``w_ih, w_hh[, b_ih, b_hh]`` -- and return
``(output, h_n)`` or, for the LSTM, ``(output, (h_n, c_n))``.  Layers and directions are
stacked here; each (layer, direction) is one fused ``Function`` from ``rnn_layers``.
"""

from lezero.core import Variable
from lezero.functions.common import data_of, mixed_precision, xp_of
from lezero.functions.registry import register
from lezero.functions.rnn.layers import ElmanLayer, GRULayer, LSTMLayer
from lezero.functions.rnn.packed import PackedSequence, check_packed
from lezero.functions.shape import concatenate, get_item, reshape, transpose
from lezero.functions.stochastic import dropout as _dropout
from lezero.utils.checks import check_bool, check_float_array, check_int, check_number

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu"]

_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _concat(xs, axis):
    return xs[0] if len(xs) == 1 else concatenate(xs, axis=axis)


def _check_weights(op, params, has_biases, num_layers, dirs, input_size, dtype, gates):
    """Check the count, shapes and dtypes of the flat weight list; return hidden size."""
    per = 4 if has_biases else 2
    if not isinstance(params, (list, tuple)) or len(params) != num_layers * dirs * per:
        got = len(params) if isinstance(params, (list, tuple)) else type(params).__name__
        raise ValueError(f"{op}: expected {num_layers * dirs * per} weights ({num_layers} "
                         f"layer(s) x {dirs} direction(s) x {per}), got {got}")
    arrs = [check_float_array(op, f"params[{i}]", p) for i, p in enumerate(params)]
    if arrs[1].ndim != 2:
        raise ValueError(f"{op}: params[1] (w_hh) must be 2-D, got shape {arrs[1].shape}")
    hidden = arrs[1].shape[1]
    for k in range(num_layers * dirs):
        layer_in = input_size if k < dirs else dirs * hidden
        want = [(gates * hidden, layer_in), (gates * hidden, hidden)]
        want += [(gates * hidden,)] * (per - 2)
        for j, shape in enumerate(want):
            a = arrs[k * per + j]
            if a.shape != shape:
                raise ValueError(f"{op}: params[{k * per + j}] (layer {k // dirs}, "
                                 f"{['w_ih', 'w_hh', 'b_ih', 'b_hh'][j]}) must have shape "
                                 f"{shape}, got {a.shape}")
            if a.dtype != dtype and not mixed_precision(dtype, a.dtype):
                raise TypeError(f"{op}: params[{k * per + j}] has dtype {a.dtype} but the "
                                f"input has dtype {dtype}")
    return hidden


def _initial_state(op, name, h, shape, like, unbatched):
    """The given state (checked) or zeros, as (layers * dirs, N, H)."""
    if h is None:
        xp = xp_of(data_of(like))
        return Variable(xp.zeros(shape, dtype=data_of(like).dtype), requires_grad=False)
    arr = check_float_array(op, name, h)
    want = (shape[0], shape[2]) if unbatched else shape
    if arr.shape != want:
        raise ValueError(f"{op}: {name} must have shape {want}, got {arr.shape}")
    return reshape(h, shape) if unbatched else h


def _check_options(op, has_biases, num_layers, dropout, training, bidirectional,
                   batch_first):
    for name, flag in (("has_biases", has_biases), ("training", training),
                       ("bidirectional", bidirectional), ("batch_first", batch_first)):
        check_bool(op, name, flag)
    check_int(op, "num_layers", num_layers, low=1)
    check_number(op, "dropout", dropout, 0, 1)


def _sequence(op, input, batch_first):
    """The input as (sum of lengths, I) rows: (rows, its array, batch sizes per step,
    batch size, unbatched?)."""
    if isinstance(input, PackedSequence):
        arr = check_float_array(op, "input.data", input.data)
        if arr.ndim != 2:
            raise ValueError(f"{op}: packed data must be (sum of lengths, input_size), got "
                             f"shape {arr.shape}")
        # the layers walk the rows by batch_sizes without bounds checks: check them here
        batch_sizes = check_packed(op, input, "input")[1].tolist()
        return input.data, arr, batch_sizes, batch_sizes[0], False
    arr = check_float_array(op, "input", input)
    if arr.ndim not in (2, 3):
        raise ValueError(f"{op}: input must be (T, N, input_size), (N, T, input_size) "
                         f"with batch_first, or unbatched (T, input_size); got shape "
                         f"{arr.shape}")
    unbatched = arr.ndim == 2
    x = input
    if unbatched:
        x = reshape(x, (arr.shape[0], 1, arr.shape[1]))
    elif batch_first:
        x = transpose(x, (1, 0, 2))
    t_len, n = data_of(x).shape[:2]
    if t_len == 0 or n == 0:
        raise ValueError(f"{op}: empty input of shape {arr.shape}")
    return reshape(x, (t_len * n, arr.shape[-1])), arr, [n] * t_len, n, unbatched


def _states(op, mode, hx, input, shape, x, unbatched):
    """The initial states (h, and c for the LSTM), each (layers * dirs, N, H), in the
    order of the packed batch."""
    if mode == "lstm":
        if hx is None:
            hx = (None, None)
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"{op}: hx must be a tuple (h_0, c_0) or None, got "
                            f"{type(hx).__name__}")
        states = [_initial_state(op, name, h, shape, x, unbatched)
                  for name, h in zip(("h_0", "c_0"), hx)]
    else:
        states = [_initial_state(op, "hx", hx, shape, x, unbatched)]
    if isinstance(input, PackedSequence) and input.sorted_indices is not None:
        order = xp_of(data_of(x)).asarray(input.sorted_indices)
        states = [get_item(s, (slice(None), order)) for s in states]
    return states


def _layer(mode, batch_sizes, reverse):
    if mode == "lstm":
        return LSTMLayer(batch_sizes, reverse=reverse)
    if mode == "gru":
        return GRULayer(batch_sizes, reverse=reverse)
    return ElmanLayer(batch_sizes, reverse=reverse, nonlinearity=mode[4:])


def _stack(mode, x, states, params, batch_sizes, sizes, dropout, training, has_biases):
    """Run the layers and directions: (last layer's output rows, final states)."""
    num_layers, dirs, n, hidden = sizes
    per = 4 if has_biases else 2
    finals = [[] for _ in states]
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            res = _layer(mode, batch_sizes, d == 1)(x, *[get_item(s, k) for s in states],
                                                     *params[k * per:(k + 1) * per])
            outs.append(res[0])
            for store, final in zip(finals, res[1:]):
                store.append(reshape(final, (1, n, hidden)))
        x = _concat(outs, axis=1)
        if dropout and training and layer < num_layers - 1:
            x = _dropout(x, dropout, training=True)
    return x, [_concat(f, axis=0) for f in finals]


def _recurrent(mode, input, hx, params, has_biases, num_layers, dropout, training,
               bidirectional, batch_first):
    op = mode
    _check_options(op, has_biases, num_layers, dropout, training, bidirectional, batch_first)
    dirs = 2 if bidirectional else 1
    x, arr, batch_sizes, n, unbatched = _sequence(op, input, batch_first)
    hidden = _check_weights(op, params, has_biases, num_layers, dirs, arr.shape[-1], arr.dtype,
                            _GATES[mode])
    states = _states(op, mode, hx, input, (num_layers * dirs, n, hidden), x, unbatched)
    out, finals = _stack(mode, x, states, params, batch_sizes, (num_layers, dirs, n, hidden),
                         dropout, training, has_biases)
    packed = isinstance(input, PackedSequence)
    if packed and input.unsorted_indices is not None:
        order = xp_of(data_of(x)).asarray(input.unsorted_indices)
        finals = [get_item(f, (slice(None), order)) for f in finals]
    if packed:
        output = PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                input.unsorted_indices)
    else:
        output = reshape(out, (len(batch_sizes), n, dirs * hidden))
        if unbatched:
            output = reshape(output, (len(batch_sizes), dirs * hidden))
            finals = [reshape(f, (num_layers * dirs, hidden)) for f in finals]
        elif batch_first:
            output = transpose(output, (1, 0, 2))
    return output, (tuple(finals) if mode == "lstm" else finals[0])


_NOTES = "fused sequence; packed input; exact first-order BPTT"


@register("rnn", double_differentiable=False, notes=_NOTES)
def lstm(input, hx, params, has_biases=True, num_layers=1, dropout=0.0, training=True,
         bidirectional=False, batch_first=False):
    """A multi-layer LSTM over a whole sequence, as ``torch.nn.LSTM`` runs it.

    ``input``: (T, N, I), (N, T, I) with ``batch_first``, unbatched (T, I), or a
    ``PackedSequence``.  ``hx``: ``(h_0, c_0)``, each (layers * dirs, N, H), or None for
    zeros.  ``params``: ``[w_ih_l0, w_hh_l0, b_ih_l0, b_hh_l0, (reverse direction), ...]``
    with PyTorch's shapes (``w_ih`` is (4H, I), gates i, f, g, o).  Returns
    ``(output, (h_n, c_n))``; ``output`` is packed when ``input`` was.
    """
    return _recurrent("lstm", input, hx, params, has_biases, num_layers, dropout, training,
                      bidirectional, batch_first)


@register("rnn", double_differentiable=False, notes=_NOTES)
def gru(input, hx, params, has_biases=True, num_layers=1, dropout=0.0, training=True,
        bidirectional=False, batch_first=False):
    """A multi-layer GRU over a whole sequence (gates r, z, n; ``w_ih`` is (3H, I)).
    Returns ``(output, h_n)``; arguments as ``lstm`` with ``hx`` a single state."""
    return _recurrent("gru", input, hx, params, has_biases, num_layers, dropout, training,
                      bidirectional, batch_first)


@register("rnn", double_differentiable=False, notes=_NOTES)
def rnn_tanh(input, hx, params, has_biases=True, num_layers=1, dropout=0.0, training=True,
             bidirectional=False, batch_first=False):
    """A multi-layer Elman RNN with tanh over a whole sequence; returns ``(output, h_n)``."""
    return _recurrent("rnn_tanh", input, hx, params, has_biases, num_layers, dropout, training,
                      bidirectional, batch_first)


@register("rnn", double_differentiable=False, notes=_NOTES)
def rnn_relu(input, hx, params, has_biases=True, num_layers=1, dropout=0.0, training=True,
             bidirectional=False, batch_first=False):
    """A multi-layer Elman RNN with relu over a whole sequence; returns ``(output, h_n)``."""
    return _recurrent("rnn_relu", input, hx, params, has_biases, num_layers, dropout, training,
                      bidirectional, batch_first)
