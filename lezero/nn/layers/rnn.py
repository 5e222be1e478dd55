"""Recurrent layers: RNN, LSTM, GRU (whole sequences) and their single-step cells.

The sequence layers hold PyTorch's parameters -- per layer ``k`` and direction,
``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (``_reverse``
for the backward direction), gates stacked as PyTorch stacks them -- and hand them, in
that order, to the fused ``F.lstm`` / ``F.gru`` / ``F.rnn_tanh`` / ``F.rnn_relu`` operators,
which run the whole sequence in one Function per layer and direction and accept a
``PackedSequence``.  Every weight starts U(-1/sqrt(hidden), 1/sqrt(hidden)), as in PyTorch.
"""
import math

from lezero.functions import PackedSequence
import lezero.functions as F
from lezero.nn import init
from lezero.nn.layers._utils import empty_parameter, named_errors
from lezero.nn.module import Module
from lezero.utils.checks import (check_array, check_bools, check_choice, check_int,
                                 check_number, check_positive_ints)

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_FUSED = {"LSTM": F.lstm, "GRU": F.gru, "RNN_TANH": F.rnn_tanh, "RNN_RELU": F.rnn_relu}


def _reset_uniform(module, hidden_size):
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


class RNNBase(Module):
    """The shared sequence layer; ``mode`` is "LSTM", "GRU", "RNN_TANH" or "RNN_RELU"."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0):
        super().__init__()
        name = type(self).__name__
        check_positive_ints(name, input_size=input_size, hidden_size=hidden_size,
                            num_layers=num_layers)
        check_bools(name, bias=bias, batch_first=batch_first, bidirectional=bidirectional)
        if check_int(name, "proj_size", proj_size) != 0:
            raise ValueError(f"{name}: proj_size={proj_size!r} (LSTM projections) is not "
                             "supported; only proj_size=0")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        self.dropout = check_number(name, "dropout", dropout, 0.0, 1.0)
        self.proj_size = 0
        gates = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * dirs
            for suffix in ("", "_reverse")[:dirs]:
                shapes = {"weight_ih": (gates, layer_in), "weight_hh": (gates, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                for kind, shape in shapes.items():
                    pname = f"{kind}_l{layer}{suffix}"
                    setattr(self, pname, empty_parameter(*shape))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self, self.hidden_size)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    def _check_input(self, input):
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        arr = check_array(name, "input.data" if packed else "input",
                          input.data if packed else input)
        ok = arr.ndim == 2 if packed else arr.ndim in (2, 3)
        if not ok or arr.shape[-1] != self.input_size:
            layout = "(N, T, input_size)" if self.batch_first else "(T, N, input_size)"
            raise ValueError(f"{name}: expected input of shape {layout} (or (T, input_size), "
                             f"or a PackedSequence) with input_size={self.input_size}, got "
                             f"shape {arr.shape}")

    def forward(self, input, hx=None):
        """Run the whole sequence.  Returns ``(output, h_n)`` (LSTM: ``(output, (h_n,
        c_n))``); ``output`` is a PackedSequence when ``input`` is one."""
        self._check_input(input)
        with named_errors(type(self).__name__):
            return _FUSED[self.mode](input, hx, self._flat_weights, self.bias,
                                     self.num_layers, self.dropout, self.training,
                                     self.bidirectional, self.batch_first)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for flag, default in (("bias", True), ("batch_first", False), ("dropout", 0.0),
                              ("bidirectional", False)):
            if getattr(self, flag) != default:
                s += f", {flag}={getattr(self, flag)}"
        return s


class RNN(RNNBase):
    """A multi-layer Elman RNN, h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh) (or relu
    with ``nonlinearity="relu"``), as ``torch.nn.RNN``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False):
        check_choice("RNN", "nonlinearity", nonlinearity, ("tanh", "relu"))
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """A multi-layer LSTM (gates i, f, g, o), as ``torch.nn.LSTM``; ``forward(input,
    (h_0, c_0))`` returns ``(output, (h_n, c_n))``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size)


class GRU(RNNBase):
    """A multi-layer GRU (gates r, z, n), as ``torch.nn.GRU``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional)


class RNNCellBase(Module):
    """The shared cell: ``weight_ih`` (gates * hidden, input), ``weight_hh`` (gates *
    hidden, hidden) and, with ``bias``, ``bias_ih`` and ``bias_hh``."""

    gates = 1

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        name = type(self).__name__
        check_positive_ints(name, input_size=input_size, hidden_size=hidden_size)
        check_bools(name, bias=bias)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = self.gates * hidden_size
        self.weight_ih = empty_parameter(rows, input_size)
        self.weight_hh = empty_parameter(rows, hidden_size)
        if bias:
            self.bias_ih = empty_parameter(rows)
            self.bias_hh = empty_parameter(rows)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self, self.hidden_size)

    def _check_input(self, input):
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: expected input of shape (N, "
                             f"{self.input_size}) or ({self.input_size},), got {input.shape}")

    def _weights(self):
        return self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """One Elman step, h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu), as
    ``torch.nn.RNNCell``; a missing ``hx`` means zeros."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh"):
        super().__init__(input_size, hidden_size, bias)
        self.nonlinearity = check_choice("RNNCell", "nonlinearity", nonlinearity,
                                         ("tanh", "relu"))

    def forward(self, input, hx=None):
        self._check_input(input)
        cell = F.rnn_tanh_cell if self.nonlinearity == "tanh" else F.rnn_relu_cell
        with named_errors("RNNCell"):
            return cell(input, hx, *self._weights())


class LSTMCell(RNNCellBase):
    """One LSTM step, as ``torch.nn.LSTMCell``: ``forward(input, (h, c))`` returns
    ``(h', c')``; a missing state means zeros."""

    gates = 4

    def forward(self, input, hx=None):
        self._check_input(input)
        if hx is None:
            hx = (None, None)
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c) or None, got "
                            f"{type(hx).__name__}")
        with named_errors("LSTMCell"):
            return F.lstm_cell(input, (hx[0], hx[1]), *self._weights())


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n), as ``torch.nn.GRUCell``."""

    gates = 3

    def forward(self, input, hx=None):
        self._check_input(input)
        with named_errors("GRUCell"):
            return F.gru_cell(input, hx, *self._weights())

