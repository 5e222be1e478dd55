"""GRUSeq2Seq (bidirectional GRU encoder, Bahdanau attention, GRUCell decoder): PyTorch
parity of logits and every gradient from shared weights; masking; greedy decoding."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.nn import models

from tests.nn.models.torch_refs import TorchGRUSeq2Seq

CFG = dict(src_vocab=17, tgt_vocab=13, embed_dim=8, hidden_size=10, attn_dim=9)


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    ref = TorchGRUSeq2Seq(17, 13, 8, 10, 9)
    ours = models.get_model("gru_seq2seq", **CFG)
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    return ours, ref


def batch():
    rng = np.random.default_rng(0)
    src = rng.integers(1, 17, (3, 7))
    src[1, 5:] = 0
    src[2, 3:] = 0
    tgt = rng.integers(1, 13, (3, 5))
    return src, tgt


def test_logits_and_gradients_match_torch(pair):
    ours, ref = pair
    src, tgt = batch()
    ours.zero_grad()
    ref.zero_grad()
    out = ours(src, tgt[:, :-1])
    theirs = ref(torch.as_tensor(src), torch.as_tensor(tgt[:, :-1]))
    np.testing.assert_allclose(out.data, theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    F.cross_entropy(out.reshape(-1, 13), tgt[:, 1:].reshape(-1)).backward()
    torch.nn.functional.cross_entropy(theirs.reshape(-1, 13),
                                      torch.as_tensor(tgt[:, 1:]).reshape(-1)).backward()
    mine = dict(ours.named_parameters())
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(mine[name].grad.data, p.grad.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_attention_never_looks_at_padding(pair):
    ours, _ = pair
    src, _ = batch()
    with lz.no_grad():
        keys, projected, bias, state = ours.encode(src)
        _, weights = ours.attention(state, keys, projected, bias)
    w = weights.data
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-5)
    assert (w[src == 0] < 1e-30).all() and (w[src != 0] > 0).all()


def test_greedy_decode_follows_argmax_and_stops_at_eos(pair):
    ours, _ = pair
    src, _ = batch()
    out = ours.greedy_decode(src, bos_idx=1, eos_idx=2, max_len=6)
    assert out.shape[0] == 3 and out.shape[1] <= 6
    tgt_in = np.concatenate([np.ones((3, 1), np.int64), out[:, :-1]], axis=1)
    with lz.no_grad():
        forced = ours(src, tgt_in).data.argmax(axis=-1)
    for row, f in zip(out, forced):
        stop = int(np.argmax(row == 2)) + 1 if (row == 2).any() else len(row)
        np.testing.assert_array_equal(row[:stop], f[:stop])
        assert (row[stop:] == 0).all()


def test_errors():
    with pytest.raises(ValueError, match="pad_idx"):
        models.get_model("gru_seq2seq", src_vocab=5, tgt_vocab=5, pad_idx=5)
    m = models.get_model("gru_seq2seq", src_vocab=5, tgt_vocab=5)
    with pytest.raises(TypeError, match="src"):
        m(np.ones((2, 3)), np.ones((2, 2), np.int64))
