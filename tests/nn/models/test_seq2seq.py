"""The seq2seq Transformer's positions and causal mask, computed from the ids with LeZero
operators (so that exports follow the lengths), equal the fixed table and triangle."""
import numpy as np
import pytest

import lezero as lz
from lezero.nn.models.seq2seq import Seq2SeqTransformer, sinusoidal_positions, sinusoids


@pytest.mark.parametrize("d_model", [6, 7])
def test_sinusoids_are_the_rows_of_the_table(d_model):
    table = sinusoidal_positions(9, d_model)
    got = sinusoids(lz.Variable(np.arange(9, dtype=np.float64)[None]), d_model)
    assert got.shape == (1, 9, d_model) and got.dtype == np.float32
    np.testing.assert_array_equal(got.data[0], table)


def test_causal_mask_from_the_ids():
    mask = Seq2SeqTransformer._causal_mask(np.array([[3, 1, 4, 1], [5, 9, 2, 6]])).data
    want = np.triu(np.full((4, 4), -np.inf, np.float32), k=1)
    np.testing.assert_array_equal(mask, want)


def test_forward_positions_equal_the_table_path():
    lz.manual_seed(0)
    model = Seq2SeqTransformer(11, 13, d_model=8, nhead=2, num_encoder_layers=1,
                               num_decoder_layers=1, dim_feedforward=16).eval()
    x = lz.Variable(np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32))
    pos = lz.Variable(np.arange(5, dtype=np.float64)[None])
    pe = model.positional_encoding
    np.testing.assert_array_equal(pe(x, pos).data, pe(x).data)
    with pytest.raises(ValueError, match="sequence length 600 exceeds max_len 512"):
        pe(lz.Variable(np.zeros((1, 600, 8), np.float32)))
