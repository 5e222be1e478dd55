"""RNN, LSTM, GRU and their cells against torch.nn: parameter names and order, forward
and every gradient for multi-layer, bidirectional, batch_first and packed input."""
import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import lezero as lz
from lezero import nn
from lezero.nn.utils import rnn as lrnn
from tests.nn.layers.layer_parity import check_layer, rand

T, N, I, H = 5, 3, 4, 6

CONFIGS = [
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"batch_first": True, "bias": False}),
    ("GRU", {"num_layers": 2}),
    ("GRU", {"bidirectional": True, "batch_first": True}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True}),
    ("RNN", {"bias": False}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
       for name, kw in CONFIGS]


def _pair(name, kwargs):
    return getattr(nn, name)(I, H, **kwargs), getattr(torch.nn, name)(I, H, **kwargs)


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=IDS)
def test_sequence_layer_matches_torch(name, kwargs):
    ours, theirs = _pair(name, kwargs)
    shape = (N, T, I) if kwargs.get("batch_first") else (T, N, I)
    check_layer(ours, theirs, rand(*shape))                       # zero initial state
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    h0 = rand(layers, N, H, seed=1)
    if name == "LSTM":
        c0 = rand(layers, N, H, seed=2)
        check_layer(ours, theirs, rand(*shape), h0, c0,
                    call=lambda m, xs: m(xs[0], (xs[1], xs[2])),
                    torch_call=lambda m, xs: m(xs[0], (xs[1], xs[2])))
    else:
        check_layer(ours, theirs, rand(*shape), h0)


@pytest.mark.parametrize("name,kwargs", [CONFIGS[1], CONFIGS[4], CONFIGS[5]],
                         ids=[IDS[1], IDS[4], IDS[5]])
def test_packed_unsorted_input_matches_torch(name, kwargs):
    ours, theirs = _pair(name, kwargs)
    bf = kwargs.get("batch_first", False)
    lengths = [3, 5, 2]                       # unsorted: the batch is sorted and restored

    def run(module, xs, pack, pad):
        packed = pack(xs[0], lengths, batch_first=bf, enforce_sorted=False)
        out, state = module(packed)
        padded, lens = pad(out, batch_first=bf)
        assert list(np.asarray(lens)) == lengths
        return padded, state

    check_layer(ours, theirs, rand(*((N, T, I) if bf else (T, N, I))),
                call=lambda m, xs: run(m, xs, lrnn.pack_padded_sequence,
                                       lrnn.pad_packed_sequence),
                torch_call=lambda m, xs: run(m, xs, trnn.pack_padded_sequence,
                                             trnn.pad_packed_sequence))


def test_packed_output_is_a_packed_sequence():
    lstm = nn.LSTM(I, H)
    packed = lrnn.pack_padded_sequence(lz.Variable(rand(T, N, I)), [5, 4, 2])
    out, (h, c) = lstm(packed)
    assert isinstance(out, lrnn.PackedSequence) and out.data.shape == (11, H)
    assert h.shape == c.shape == (1, N, H)


def test_unbatched_input_matches_torch():
    check_layer(*_pair("GRU", {"num_layers": 2}), rand(T, I))
    check_layer(*_pair("LSTM", {"bidirectional": True}), rand(T, I))


def test_dropout_between_layers_only_in_training():
    ours, theirs = _pair("LSTM", {"num_layers": 2, "dropout": 0.5})
    check_layer(ours, theirs, rand(T, N, I), train=False)        # eval: no dropout, as torch
    ours.train()
    x = lz.Variable(rand(T, N, I))
    lz.manual_seed(1)
    a = ours(x)[0].data
    lz.manual_seed(1)
    np.testing.assert_array_equal(ours(x)[0].data, a)            # seeded: reproducible
    ours.eval()
    assert not np.allclose(ours(x)[0].data, a)                   # training dropped something


CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}),
         ("LSTMCell", {}), ("LSTMCell", {"bias": False}), ("GRUCell", {})]


@pytest.mark.parametrize("name,kwargs", CELLS, ids=[f"{n}{k}" for n, k in CELLS])
def test_cell_matches_torch(name, kwargs):
    ours, theirs = getattr(nn, name)(I, H, **kwargs), getattr(torch.nn, name)(I, H, **kwargs)
    check_layer(ours, theirs, rand(N, I))                         # no state: zeros
    check_layer(ours, theirs, rand(I, seed=3))                    # unbatched
    if name == "LSTMCell":
        check_layer(ours, theirs, rand(N, I), rand(N, H, seed=1), rand(N, H, seed=2),
                    call=lambda m, xs: m(xs[0], (xs[1], xs[2])),
                    torch_call=lambda m, xs: m(xs[0], (xs[1], xs[2])))
    else:
        check_layer(ours, theirs, rand(N, I), rand(N, H, seed=1))


def test_parameter_names_follow_torch():
    lstm = nn.LSTM(I, H, num_layers=2, bidirectional=True)
    names = [n for n, _ in lstm.named_parameters()]
    assert names[:8] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                         "bias_hh_l0_reverse"]
    assert lstm.weight_ih_l1.shape == (4 * H, 2 * H)
    count = sum(p.numel() for p in torch.nn.LSTM(I, H, 2, bidirectional=True).parameters())
    assert repr(lstm) == f"LSTM(4, 6, num_layers=2, bidirectional=True)  # {count:,} params"


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.LSTM(I, 0), ValueError, "LSTM: hidden_size must be a positive int"),
    (lambda: nn.GRU(I, H, num_layers=0), ValueError, "GRU: num_layers"),
    (lambda: nn.RNN(I, H, nonlinearity="sigmoid"), ValueError, "RNN: nonlinearity must be"),
    (lambda: nn.LSTM(I, H, dropout=1.5), ValueError, r"LSTM: dropout must be in \[0.0, 1.0\]"),
    (lambda: nn.LSTM(I, H, proj_size=2), ValueError, "LSTM: proj_size=2"),
    (lambda: nn.GRU(I, H, batch_first=1), TypeError, "GRU: batch_first must be a bool"),
    (lambda: nn.LSTMCell(I, H, bias="no"), TypeError, "LSTMCell: bias must be a bool"),
    (lambda: nn.RNNCell(I, H, nonlinearity="gelu"), ValueError, "RNNCell: nonlinearity"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    with pytest.raises(ValueError, match=r"LSTM: expected input of shape \(T, N, input_size\)"):
        nn.LSTM(I, H)(lz.Variable(rand(T, N, I + 1)))
    with pytest.raises(ValueError, match="GRU: gru: hx must have shape"):
        nn.GRU(I, H)(lz.Variable(rand(T, N, I)), lz.Variable(rand(2, N, H)))
    with pytest.raises(TypeError, match="LSTMCell: hx must be a tuple"):
        nn.LSTMCell(I, H)(lz.Variable(rand(N, I)), lz.Variable(rand(N, H)))
    with pytest.raises(ValueError, match=r"GRUCell: expected input of shape \(N, 4\)"):
        nn.GRUCell(I, H)(lz.Variable(rand(N, 2, I)))
