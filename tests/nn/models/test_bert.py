"""BertForMaskedLM against Hugging Face's: HF's state_dict loads as-is (strict), the
logits agree with and without a padding mask, and so do the loss and every gradient."""
import numpy as np
import pytest
import lezero as lz
from lezero.nn import models
from lezero.nn.models.bert import mlm_mask

from tests.nn.models.hf_parity import (build_pair, check_loss_and_grads, logits_pair,
                                       random_ids, transformers)  # noqa: F401

SMALL = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=37)


def bert_pair(transformers, **overrides):
    return build_pair(transformers, "BertConfig", "BertForMaskedLM", "bert",
                      **{**SMALL, **overrides})


@pytest.mark.parametrize("overrides", [{}, dict(tie_word_embeddings=False),
                                       dict(hidden_act="gelu_new", type_vocab_size=3,
                                            layer_norm_eps=1e-5, max_position_embeddings=20)],
                         ids=["tied", "untied", "variant"])
def test_logits_match_hf(transformers, overrides):
    ours, ref = bert_pair(transformers, **overrides)
    ids = random_ids((2, 7), 99)
    mine, theirs = logits_pair(ours, ref, ids)
    assert mine.shape == (2, 7, 99)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
    types = np.random.default_rng(1).integers(0, ours.config.type_vocab_size, (2, 7))
    mine, theirs = logits_pair(ours, ref, ids, token_type_ids=types)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


def test_padding_mask_matches_hf_and_hides_the_padding(transformers):
    ours, ref = bert_pair(transformers)
    ids = random_ids((3, 6), 99)
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    ids[mask == 0] = 0
    mine, theirs = logits_pair(ours, ref, ids, mask)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
    # What the padding holds must not change the real tokens' logits.
    other = ids.copy()
    other[mask == 0] = 5
    with lz.no_grad():
        again = ours(other, attention_mask=mask).data
    np.testing.assert_allclose(again[mask == 1], mine[mask == 1], atol=1e-5)
    with lz.no_grad():
        unmasked = ours(other).data
    assert np.abs(unmasked[1, :4] - mine[1, :4]).max() > 1e-3


@pytest.mark.parametrize("tied", [True, False])
def test_mlm_loss_and_gradients_match_hf(transformers, tied):
    ours, ref = bert_pair(transformers, tie_word_embeddings=tied)
    ids = random_ids((2, 8), 99, seed=3)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    labels = np.full_like(ids, -100)
    labels[:, [1, 4]] = ids[:, [1, 4]]
    check_loss_and_grads(ours, ref, ids, labels, mask)


def test_tied_weights_are_one_parameter():
    m = models.get_model("bert", **SMALL)
    head = m.cls.predictions
    assert head.decoder.weight is m.bert.embeddings.word_embeddings.weight
    assert head.decoder.bias is head.bias
    keys = m.state_dict()
    assert {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
            "cls.predictions.bias"} <= set(keys)
    untied = models.get_model("bert", tie_word_embeddings=False, **SMALL)
    assert untied.cls.predictions.decoder.weight is not \
        untied.bert.embeddings.word_embeddings.weight
    assert untied.num_parameters() == m.num_parameters() + 99 * 32 + 99


def test_config_errors_name_the_field():
    with pytest.raises(TypeError, match="hidden_sise"):
        models.get_model("bert", hidden_sise=32)
    with pytest.raises(ValueError, match="divisible"):
        models.get_model("bert", hidden_size=30, num_attention_heads=4)
    with pytest.raises(TypeError, match="tie_word_embeddings"):
        models.get_model("bert", tie_word_embeddings="no", **SMALL)
    with pytest.raises(ValueError, match="hidden_act"):
        models.get_model("bert", hidden_act="gelu2", **SMALL)
    with pytest.raises(NotImplementedError, match="is_decoder"):
        models.get_model("bert", is_decoder=True, **SMALL)
    with pytest.raises(NotImplementedError, match="relative_key"):
        models.get_model("bert", position_embedding_type="relative_key", **SMALL)
    with pytest.raises(TypeError, match="config must be"):
        models.get_model("bert", config=3)
    m = models.get_model("bert", config=SMALL, num_hidden_layers=1)    # explicit wins
    assert m.config.hidden_size == 32 and len(m.bert.encoder.layer) == 1


def test_forward_input_errors():
    m = models.get_model("bert", **SMALL).eval()
    with pytest.raises(ValueError, match=r"\[0, 99\)"):
        m(np.array([[1, 99]]))
    with pytest.raises(TypeError, match="integer dtype"):
        m(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        m(np.array([1, 2]))
    with pytest.raises(ValueError, match="attention_mask"):
        m(np.array([[1, 2]]), attention_mask=np.ones((1, 3)))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        models.get_model("bert", max_position_embeddings=4, **{**SMALL})(
            np.ones((1, 5), np.int64))


def test_mlm_mask_follows_the_80_10_10_rule():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50, (200, 50))
    ids[:, 0] = 2                                      # a special token: never chosen
    inputs, labels = mlm_mask(ids, 4, 50, np.random.default_rng(1), special_ids=(2,))
    chosen = labels != -100
    assert not chosen[:, 0].any()
    assert abs(chosen.mean() - 0.15 * 49 / 50) < 0.01
    np.testing.assert_array_equal(labels[chosen], ids[chosen])
    np.testing.assert_array_equal(inputs[~chosen], ids[~chosen])
    masked = (inputs == 4)[chosen].mean()
    kept = (inputs == ids)[chosen].mean()
    assert abs(masked - 0.8) < 0.03 and abs(kept - 0.1 - 0.1 / 45) < 0.03
