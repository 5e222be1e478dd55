"""PackedSequences that do not describe their data (issue 32).

A ``PackedSequence`` whose ``batch_sizes`` did not match its data made ``nn.LSTM`` read
memory it did not own (outputs up to 5e35 from an LSTM whose states are bounded by 1).
Now the recurrent operators, ``pad_packed_sequence`` and the fused layers check a packed
input at the point of use -- batch_sizes 1-D positive non-increasing ints summing to the
data's rows, sorted/unsorted indices inverse permutations of the batch -- and
pack_padded_sequence checks its lengths; each wrong one is a ValueError naming the
argument (TypeError for a wrong kind).
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn
from lezero.functions.rnn.layers import ElmanLayer, GRULayer, LSTMLayer
from lezero.quantization import quantize_dynamic

I, H = 4, 8
LAYERS = {"LSTM": lambda: nn.LSTM(I, H), "GRU": lambda: nn.GRU(I, H),
          "RNN_TANH": lambda: nn.RNN(I, H), "RNN_RELU": lambda: nn.RNN(I, H, nonlinearity="relu"),
          "LSTM2bi": lambda: nn.LSTM(I, H, num_layers=2, bidirectional=True)}
OP = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu",
      "LSTM2bi": "lstm"}


def data(rows, features=I, seed=0):
    rng = np.random.default_rng(seed)
    return lz.Variable(rng.standard_normal((rows, features)).astype(np.float32))


def packed(rows=5, batch_sizes=(3, 2), sorted_indices=None, unsorted_indices=None):
    return F.PackedSequence(data(rows), np.asarray(batch_sizes), sorted_indices,
                            unsorted_indices)


BAD = [   # (packed input, error, message after "<op>: ")
    (packed(5, (3, 3, 3)), ValueError, r"input.data must be \(sum of batch_sizes = 9, \*\), "
                                       r"got shape \(5, 4\)"),
    (packed(5, (3, 1)), ValueError, r"input.data must be \(sum of batch_sizes = 4"),
    (packed(5, (2, 3)), ValueError, r"input.batch_sizes must be a non-empty, non-increasing "
                                    r"1-D array of positive ints, got \[2, 3\]"),
    (packed(5, (5, 0)), ValueError, r"input.batch_sizes must be .*got \[5, 0\]"),
    (packed(5, (6, -1)), ValueError, r"input.batch_sizes must be .*got \[6, -1\]"),
    (packed(5, ()), ValueError, r"input.batch_sizes must be a non-empty"),
    (packed(5, [[3, 2]]), ValueError, r"input.batch_sizes must be .*1-D"),
    (packed(5, (3.0, 2.0)), TypeError, "input.batch_sizes must hold ints, got dtype float64"),
    (packed(5, (True, True)), TypeError, "input.batch_sizes must hold ints, got dtype bool"),
    (packed(5, (3, 2), [0, 0, 1], [0, 1, 2]), ValueError,
     r"input.sorted_indices must be a permutation of range\(3\)"),
    (packed(5, (3, 2), [0, 1, 7], [0, 1, 2]), ValueError,
     r"input.sorted_indices must be a permutation of range\(3\).*got \[0, 1, 7\]"),
    (packed(5, (3, 2), [0, 1], [0, 1]), ValueError,
     r"input.sorted_indices must be a permutation of range\(3\)"),
    (packed(5, (3, 2), [1, 2, 0], [1, 2, 0]), ValueError,
     "input.unsorted_indices must be the inverse permutation of input.sorted_indices"),
    (packed(5, (3, 2), [1, 2, 0], None), ValueError,
     r"input.unsorted_indices must be the inverse .*\(both given, or neither\)"),
    (packed(5, (3, 2), [1.0, 2.0, 0.0], [2, 0, 1]), TypeError,
     "input.sorted_indices must hold ints"),
    (packed(5, (3, 2), [1, 2, 0], [2, -1, 1]), ValueError,
     r"input.unsorted_indices must be a permutation of range\(3\)"),
]


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("bad,exc,match", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_recurrent_layers_refuse_a_packed_input_that_lies(layer, bad, exc, match):
    module = LAYERS[layer]()
    with pytest.raises(exc, match=rf"^{type(module).__name__}: {OP[layer]}: {match}"):
        module(bad)


@pytest.mark.parametrize("bad,exc,match", BAD[:9], ids=[f"bad{i}" for i in range(9)])
def test_functional_operators_refuse_it_too(bad, exc, match):
    m = nn.GRU(I, H)
    with pytest.raises(exc, match=f"^gru: {match}"):
        F.gru(bad, None, m._flat_weights)


def test_the_issue_case_gives_an_error_not_huge_outputs():
    """5 rows declared as 3 steps of 3 (the probe's case): refused; the honest packing
    of the same rows gives outputs bounded by 1, as an LSTM's must be."""
    lstm = nn.LSTM(I, H)
    with pytest.raises(ValueError, match="sum of batch_sizes = 9"):
        lstm(packed(5, (3, 3, 3)))
    out, (h, c) = lstm(packed(5, (2, 2, 1)))
    assert np.abs(out.data.data).max() < 1 and np.abs(h.data).max() < 1
    assert out.data.shape == (5, H) and h.shape == (1, 2, H)


def test_valid_unsorted_packs_still_run():
    x = lz.Variable(np.random.default_rng(1).standard_normal((4, 3, I)).astype(np.float32))
    p = F.pack_padded_sequence(x, [2, 4, 3], enforce_sorted=False)
    out, h = nn.GRU(I, H)(p)
    padded, lengths = F.pad_packed_sequence(out)
    assert padded.shape == (4, 3, H) and lengths.tolist() == [2, 4, 3]


@pytest.mark.parametrize("layer_cls,n_state", [(LSTMLayer, 2), (GRULayer, 1),
                                               (ElmanLayer, 1)])
def test_the_fused_functions_check_their_rows_and_states(layer_cls, n_state):
    """The per-layer Functions (what the operators call) refuse batch sizes that do not
    fit x or the state, whoever builds them."""
    gates = {LSTMLayer: 4, GRULayer: 3, ElmanLayer: 1}[layer_cls]
    weights = [np.zeros((gates * H, I), np.float32), np.zeros((gates * H, H), np.float32)]
    states = [np.zeros((3, H), np.float32)] * n_state
    name = layer_cls.name if layer_cls is not ElmanLayer else "rnn_tanh"
    with pytest.raises(ValueError, match=rf"^{name}: time step \(offset 5, batch size 2\) does "
                                         rf"not fit x of shape \(5, 4\)"):
        layer_cls([3, 2, 2])(data(5).data, *states, *weights)
    with pytest.raises(ValueError, match=rf"^{name}: x must have shape \(3, 4\) \(batch_sizes "
                                         rf"sum to 3, the widest step is 2\), got \(5, 4\)"):
        layer_cls([2, 1])(data(5).data, *states, *weights)
    with pytest.raises(ValueError, match=rf"^{name}: time step \(offset 0, batch size 3\) does "
                                         rf"not fit x of shape \(5, 4\) and a state of 2 rows"):
        layer_cls([3, 2])(data(5).data, *[s[:2] for s in states], *weights)
    wide = gates * (H - 1)
    with pytest.raises(ValueError, match=rf"^{name}: w_ih must have shape \({wide}, 4\)"):
        layer_cls([3, 2])(data(5).data, *states, weights[0], weights[1][:, :H - 1])
    with pytest.raises(ValueError, match=r"batch_sizes must be a non-empty list of positive"):
        layer_cls([2, 0])
    crafted = layer_cls([3, 2])          # steps set by hand, as a loaded graph could
    crafted.steps = [(0, 3), (4, 2)]
    with pytest.raises(ValueError, match=r"time step \(offset 4, batch size 2\) does not fit"):
        crafted(data(5).data, *states, *weights)


@pytest.mark.parametrize("lengths,exc,match", [
    ([4, 5], ValueError, "a length of 5 exceeds the 4 time steps"),
    ([4, 0], ValueError, r"every length must be positive, got \[4, 0\]"),
    ([4, -1], ValueError, "every length must be positive"),
    ([4], ValueError, "got 1 lengths for a batch of 2"),
    ([4, 3, 1], ValueError, "got 3 lengths for a batch of 2"),
    ([4.0, 3.0], TypeError, "lengths must be a 1-D sequence of ints"),
    ([[4, 3]], TypeError, "lengths must be a 1-D sequence of ints"),
])
def test_pack_padded_sequence_checks_its_lengths(lengths, exc, match):
    x = np.zeros((4, 2, I), np.float32)
    with pytest.raises(exc, match="^pack_padded_sequence: " + match):
        F.pack_padded_sequence(x, lengths)


def test_pack_padded_sequence_checks_its_flags():
    x = np.zeros((4, 2, I), np.float32)
    with pytest.raises(TypeError, match="pack_padded_sequence: batch_first must be a bool"):
        F.pack_padded_sequence(x, [4, 3], batch_first="yes")
    with pytest.raises(TypeError, match="pack_padded_sequence: enforce_sorted must be a bool"):
        F.pack_padded_sequence(x, [3, 4], enforce_sorted=0)


@pytest.mark.parametrize("bad,exc,match", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_pad_packed_sequence_refuses_it(bad, exc, match):
    with pytest.raises(exc, match="^pad_packed_sequence: " + match.replace("input", "sequence")):
        F.pad_packed_sequence(bad)


def test_pad_packed_sequence_checks_its_options():
    p = packed(5, (3, 2))
    with pytest.raises(TypeError, match="pad_packed_sequence: total_length must be an int"):
        F.pad_packed_sequence(p, total_length=2.5)
    with pytest.raises(TypeError, match="pad_packed_sequence: padding_value must be a number"):
        F.pad_packed_sequence(p, padding_value="0")
    with pytest.raises(TypeError, match="pad_packed_sequence: batch_first must be a bool"):
        F.pad_packed_sequence(p, batch_first=None)


# ----- the dynamic-quantized LSTM -----------------------------------------------------------
def quantized(**kwargs):
    return quantize_dynamic(nn.Sequential(nn.LSTM(I, H, **kwargs)))[0]


def test_dynamic_lstm_refuses_packed_input_and_wrong_states():
    q = quantized(num_layers=2)
    with pytest.raises(TypeError, match="^DynamicQuantLSTM: input is a PackedSequence"):
        q(packed(5, (3, 2)))
    with pytest.raises(TypeError, match="^DynamicQuantLSTM: input is a PackedSequence"):
        q(packed(5, (3, 3, 3)))
    x = np.zeros((6, 3, I), np.float32)
    good = np.zeros((2, 3, H), np.float32)
    with pytest.raises(ValueError, match=r"^DynamicQuantLSTM: h_0 must have shape \(2, 3, 8\)"
                                         r", got \(1, 3, 8\)"):
        q(x, (np.zeros((1, 3, H), np.float32), good))
    with pytest.raises(ValueError, match=r"^DynamicQuantLSTM: c_0 must have shape \(2, 3, 8\)"):
        q(x, (good, np.zeros((2, 2, H), np.float32)))
    with pytest.raises(TypeError, match="^DynamicQuantLSTM: hx must be a tuple"):
        q(x, good)
    with pytest.raises(ValueError, match=r"^DynamicQuantLSTM: input must be a non-empty "
                                         r"\(T, N, 4\)"):
        q(np.zeros((6, 3, I + 1), np.float32))
    with pytest.raises(ValueError, match="^DynamicQuantLSTM: input must be a non-empty"):
        q(np.zeros((0, 3, I), np.float32))
    with pytest.raises(TypeError, match="^DynamicQuantLSTM: input must be floating point"):
        q(np.zeros((6, 3, I), np.int64))
    out, (h, c) = q(x, (good, good))
    assert out.shape == (6, 3, H) and h.shape == (2, 3, H)


def test_dynamic_lstm_unbatched_and_batch_first_states():
    q = quantized(batch_first=True)
    x = np.zeros((3, 6, I), np.float32)                 # (N, T, I)
    with pytest.raises(ValueError, match=r"h_0 must have shape \(1, 3, 8\), got \(1, 6, 8\)"):
        q(x, (np.zeros((1, 6, H), np.float32),) * 2)
    out, (h, _) = q(np.zeros((6, I), np.float32), (np.zeros((1, H), np.float32),) * 2)
    assert out.shape == (6, H) and h.shape == (1, H)
