"""jit.trace's value check (lezero/jit/checks.py): the second run gets other values even
for inputs that rolling leaves alone (an all-ones mask), and attributes that only scale a
gradient (embedding's padding weights) do not make a trace refuse a padded example."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, nn
from lezero.jit import TraceError
from lezero.jit.checks import perturb
from lezero.nn import models as M


def test_perturb_gives_other_values_where_rolling_changes_nothing():
    ones = np.ones((2, 3), np.int64)
    ids = np.array([[0, 1, 2], [2, 1, 0]])
    got = perturb([ones, ids, np.ones(4, bool), np.array([3]), np.zeros(3, np.int32)])
    np.testing.assert_array_equal(got[0], np.zeros((2, 3)))        # (1 + 1) % 2
    assert got[0].dtype == np.int64
    np.testing.assert_array_equal(got[1], [[0, 0, 1], [2, 2, 1]])  # rolled: a permutation
    np.testing.assert_array_equal(got[2], np.zeros(4, bool))       # negated
    np.testing.assert_array_equal(got[3], [0])                     # one element: (3 + 1) % 4
    np.testing.assert_array_equal(got[4], np.zeros(3))             # max 0: nothing to change
    assert got[4].dtype == np.int32


def test_perturb_scales_floats_and_leaves_other_arguments():
    x = np.array([1.0, 2.0], np.float32)
    got = perturb([x, lz.Variable(x), np.float32(3.0), "text", 5])
    np.testing.assert_allclose(got[0], [0.875, 1.625])
    np.testing.assert_allclose(got[1], [0.875, 1.625])
    assert got[2:] == [np.float32(3.0), "text", 5]


class _NumpyMask(nn.Module):
    """Adds a padding bias computed with NumPy on the mask's data: a trace freezes it."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, mask):
        data = mask.data if isinstance(mask, lz.Variable) else mask
        bias = np.where(data[..., None] > 0, 0.0, -1e4).astype(np.float32)
        return self.proj(x) + bias


class _OperatorMask(nn.Module):
    """The same bias from LeZero operators: a trace keeps the mask as an input."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, mask):
        mask = lz.as_variable(mask)
        return self.proj(x) + F.expand_dims(1.0 - mask.to(dtype=np.float32), -1) * -1e4


X = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
PADDED = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


@pytest.mark.parametrize("dtype", [np.int64, bool])
def test_a_mask_computed_in_numpy_is_refused_even_when_the_example_mask_is_all_ones(dtype):
    lz.manual_seed(0)
    model = _NumpyMask().eval()
    all_ones = np.ones((2, 5), dtype)
    with pytest.raises(TraceError, match=r"input 1 of node \d+ \(Add\).*would be frozen"):
        jit.trace(model, X, all_ones)
    frozen = jit.trace(model, X, all_ones, check_trace=False)   # what the check prevents
    with lz.no_grad():
        assert not np.allclose(frozen(X, PADDED.astype(dtype)).data,
                               model(X, PADDED.astype(dtype)).data)


def test_a_mask_computed_with_operators_traces_from_an_all_ones_example():
    lz.manual_seed(0)
    model = _OperatorMask().eval()
    g = jit.trace(model, X, np.ones((2, 5), np.int64))
    with lz.no_grad():
        np.testing.assert_allclose(g(X, PADDED).data, model(X, PADDED).data, rtol=1e-6)


def _textcnn():
    lz.manual_seed(0)
    return M.get_model("textcnn", vocab_size=30, num_classes=4, embed_dim=12,
                       kernel_sizes=(2, 3), num_filters=4).eval()


def test_textcnn_traces_from_a_padded_example_and_replays_other_padding():
    model = _textcnn()
    padded = np.array([[5, 7, 9, 0, 0, 0], [3, 4, 2, 8, 1, 6]])
    g = jit.trace(model, padded)            # refused before: Embedding's 'use_weight'
    other = np.array([[2, 0, 0, 0, 0, 0], [9, 9, 4, 1, 0, 0]])
    with lz.no_grad():
        np.testing.assert_allclose(g(other).data, model(other).data, rtol=1e-5, atol=1e-6)


def test_gradient_only_attributes_are_skipped_but_not_the_forward_indices():
    emb = nn.Embedding(10, 3, padding_idx=0)
    g = jit.trace(emb, np.array([4, 0, 0, 2]))
    np.testing.assert_array_equal(g(np.array([0, 7, 7, 1])).data,
                                  emb.weight.data[[0, 7, 7, 1]])

    def slices_in_numpy(ids):                 # indices taken from .data: frozen, refused
        return emb(ids.data[:, 0] + 0)
    with pytest.raises(TraceError, match=r"node 0 \(Embedding\).*'indices'"):
        jit.trace(slices_in_numpy, np.array([[4, 0], [0, 2], [3, 0]]))


def test_gru_seq2seq_traces_from_a_padded_example_and_replays_other_padding():
    lz.manual_seed(0)
    model = M.get_model("gru_seq2seq", src_vocab=12, tgt_vocab=12, embed_dim=4,
                        hidden_size=4, attn_dim=4).eval()
    src, tgt = np.array([[5, 7, 9, 0, 0], [3, 4, 2, 8, 1]]), np.array([[1, 2, 3], [1, 4, 0]])
    g = jit.trace(model, src, tgt)      # refused before: its embeddings' 'use_weight'
    src2, tgt2 = np.array([[2, 0, 0, 0, 0], [6, 6, 3, 0, 0]]), np.array([[1, 0, 0], [1, 9, 2]])
    with lz.no_grad():
        np.testing.assert_allclose(g(src2, tgt2).data, model(src2, tgt2).data,
                                   rtol=1e-5, atol=1e-6)


def test_a_variable_made_from_the_inputs_during_the_call_is_refused_not_kept_as_a_weight():
    def pooled(x, mask):                 # lz.Variable requires a gradient: a "parameter"
        real = lz.Variable((mask.data != 0).astype(np.float32))
        return F.sum(x * F.expand_dims(real, -1), axis=1)
    with pytest.raises(TraceError, match=r"%param is a Variable created during the call"):
        jit.trace(pooled, X, PADDED)
    w = lz.Variable(np.full((4,), 2.0, np.float32))      # made before the call: a weight

    def scaled(x, mask):
        return x * w + lz.Variable(np.ones((4,), np.float32))   # same values every call
    g = jit.trace(scaled, X, PADDED)
    w.data[...] = 3.0
    np.testing.assert_allclose(g(X, PADDED).data, X * 3.0 + 1.0, rtol=1e-6)
