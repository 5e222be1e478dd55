"""Single-step recurrent cells: ``lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``,
``rnn_relu_cell``, with ``torch``'s cell functions' arguments.

They are built from LeZero operators, so they are differentiable to any order; they
follow PyTorch's gate order (LSTM i, f, g, o; GRU r, z, n) and weight layout (``w_ih`` is
(gates * hidden, input), ``w_hh`` is (gates * hidden, hidden)).  Inputs are (N, I), or
unbatched (I,).  A missing state (None) means zeros.  ``lstm_cell`` takes its state as
the tuple ``hx = (h, c)``; the older form ``lstm_cell(x, h, c, w_ih, w_hh, ...)`` is still
accepted (see its docstring).
"""
from lezero.core import Variable
from lezero.functions.activation import relu, sigmoid
from lezero.functions.common import data_of, xp_of
from lezero.functions.linalg import matmul
from lezero.functions.math import tanh
from lezero.functions.registry import register
from lezero.functions.shape import get_item, reshape, transpose
from lezero.utils.checks import check_float_array

__all__ = ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]


def _prepare(op, gates, x, states, w_ih, w_hh, b_ih, b_hh):
    """Check a cell's arguments; return (x as (N, I), states as (N, H), hidden, batched)."""
    xa = check_float_array(op, "x", x)
    if xa.ndim not in (1, 2):
        raise ValueError(f"{op}: x must be (N, input_size) or (input_size,), got shape "
                         f"{xa.shape}")
    wi, wh = check_float_array(op, "w_ih", w_ih), check_float_array(op, "w_hh", w_hh)
    if wh.ndim != 2 or wh.shape[0] != gates * wh.shape[1]:
        raise ValueError(f"{op}: w_hh must be ({gates} * hidden, hidden), got shape {wh.shape}")
    hidden = wh.shape[1]
    if wi.shape != (gates * hidden, xa.shape[-1]):
        raise ValueError(f"{op}: w_ih must have shape {(gates * hidden, xa.shape[-1])} for "
                         f"input of shape {xa.shape}, got {wi.shape}")
    for name, b in (("b_ih", b_ih), ("b_hh", b_hh)):
        if b is not None and check_float_array(op, name, b).shape != (gates * hidden,):
            raise ValueError(f"{op}: {name} must have shape {(gates * hidden,)}, got "
                             f"{data_of(b).shape}")
    batched = xa.ndim == 2
    n = xa.shape[0] if batched else 1
    out = []
    for name, h in states:
        if h is None:
            h = Variable(xp_of(xa).zeros((n, hidden), dtype=xa.dtype), requires_grad=False)
        else:
            want = (n, hidden) if batched else (hidden,)
            if check_float_array(op, name, h).shape != want:
                raise ValueError(f"{op}: {name} must have shape {want}, got "
                                 f"{data_of(h).shape}")
            h = h if batched else reshape(h, (1, hidden))
        out.append(h)
    x = x if batched else reshape(x, (1, xa.shape[0]))
    return x, out, hidden, batched


def _affine(x, w, b):
    """x @ w.T (+ b)."""
    y = matmul(x, transpose(w))
    return y if b is None else y + b


def _chunk(y, k, hidden):
    return get_item(y, (slice(None), slice(k * hidden, (k + 1) * hidden)))


def _unbatch(h, batched):
    return h if batched else reshape(h, (h.shape[1],))


def _lstm_arguments(hx, w_ih, w_hh, b_ih, b_hh, legacy):
    """((h, c), w_ih, w_hh, b_ih, b_hh) from either calling form of ``lstm_cell``."""
    if getattr(data_of(b_ih), "ndim", None) == 2:
        # The older form (x, h, c, w_ih, w_hh[, b_ih, b_hh]): a bias is never 2-D, so a
        # matrix in b_ih's place is w_hh, and every argument after x sits one place on.
        if len(legacy) > 1:
            raise TypeError(f"lstm_cell: takes at most 7 positional arguments in the "
                            f"(x, h, c, w_ih, w_hh, b_ih, b_hh) form, got {6 + len(legacy)}")
        return (hx, w_ih), w_hh, b_ih, b_hh, (legacy[0] if legacy else None)
    if legacy:
        raise TypeError(f"lstm_cell: takes at most 6 positional arguments, got "
                        f"{6 + len(legacy)}")
    if hx is None:
        return (None, None), w_ih, w_hh, b_ih, b_hh
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError(f"lstm_cell: hx must be a tuple (h, c) or None, got "
                        f"{type(hx).__name__}")
    return tuple(hx), w_ih, w_hh, b_ih, b_hh


@register("rnn")
def lstm_cell(x, hx, w_ih, w_hh, b_ih=None, b_hh=None, *legacy):
    """One LSTM step: returns ``(h', c')`` with c' = f c + i g, h' = o tanh(c').

    ``hx`` is the tuple ``(h, c)`` (either may be None, or ``hx`` None: zeros), as in
    ``torch.lstm_cell`` and ``nn.LSTMCell``.  The older form with the two states as
    separate arguments, ``lstm_cell(x, h, c, w_ih, w_hh[, b_ih[, b_hh]])`` (positional),
    is accepted too: it is recognised by the matrix ``w_hh`` where the first form has
    the bias ``b_ih``.
    """
    (h, c), w_ih, w_hh, b_ih, b_hh = _lstm_arguments(hx, w_ih, w_hh, b_ih, b_hh, legacy)
    x, (h, c), hidden, batched = _prepare("lstm_cell", 4, x, [("hx", h), ("cx", c)],
                                          w_ih, w_hh, b_ih, b_hh)
    g = _affine(x, w_ih, b_ih) + _affine(h, w_hh, b_hh)
    i, f = sigmoid(_chunk(g, 0, hidden)), sigmoid(_chunk(g, 1, hidden))
    cand, o = tanh(_chunk(g, 2, hidden)), sigmoid(_chunk(g, 3, hidden))
    c = f * c + i * cand
    h = o * tanh(c)
    return _unbatch(h, batched), _unbatch(c, batched)


@register("rnn")
def gru_cell(x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step: n = tanh(W_in x + b_in + r (W_hn h + b_hn)); h' = (1 - z) n + z h."""
    x, (h,), hidden, batched = _prepare("gru_cell", 3, x, [("hx", hx)], w_ih, w_hh, b_ih,
                                        b_hh)
    gi, gh = _affine(x, w_ih, b_ih), _affine(h, w_hh, b_hh)
    r = sigmoid(_chunk(gi, 0, hidden) + _chunk(gh, 0, hidden))
    z = sigmoid(_chunk(gi, 1, hidden) + _chunk(gh, 1, hidden))
    n = tanh(_chunk(gi, 2, hidden) + r * _chunk(gh, 2, hidden))
    return _unbatch(n + z * (h - n), batched)


@register("rnn")
def rnn_tanh_cell(x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman step: h' = tanh(W_ih x + b_ih + W_hh h + b_hh)."""
    x, (h,), _, batched = _prepare("rnn_tanh_cell", 1, x, [("hx", hx)], w_ih, w_hh, b_ih,
                                   b_hh)
    return _unbatch(tanh(_affine(x, w_ih, b_ih) + _affine(h, w_hh, b_hh)), batched)


@register("rnn")
def rnn_relu_cell(x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman step with relu: h' = relu(W_ih x + b_ih + W_hh h + b_hh)."""
    x, (h,), _, batched = _prepare("rnn_relu_cell", 1, x, [("hx", hx)], w_ih, w_hh, b_ih,
                                   b_hh)
    return _unbatch(relu(_affine(x, w_ih, b_ih) + _affine(h, w_hh, b_hh)), batched)
