"""LlamaForCausalLM against Hugging Face's: RMSNorm, rotary embeddings (rotate_half),
SwiGLU and grouped-query attention give HF's logits, loss and gradients from HF's
state_dict loaded as-is."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.nn import models
from lezero.nn.models.rotary import apply_rotary, rope_inv_freq, rotary_cos_sin

from tests.nn.models.hf_parity import (build_pair, check_loss_and_grads, logits_pair,
                                       random_ids, transformers)  # noqa: F401

SMALL = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=37, max_position_embeddings=64)


def llama_pair(transformers, **overrides):
    return build_pair(transformers, "LlamaConfig", "LlamaForCausalLM", "llama",
                      **{**SMALL, **overrides})


LLAMA3_ROPE = dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                   high_freq_factor=4.0, original_max_position_embeddings=16)


@pytest.mark.parametrize("overrides", [
    {}, dict(num_key_value_heads=4, tie_word_embeddings=True),
    dict(num_key_value_heads=1, head_dim=12, rope_theta=300.0, attention_bias=True,
         mlp_bias=True, hidden_act="gelu", rms_norm_eps=1e-3),
    dict(rope_parameters=LLAMA3_ROPE, pad_token_id=0)],
    ids=["gqa", "mha-tied", "mqa-variant", "llama3-rope"])
def test_logits_match_hf(transformers, overrides):
    ours, ref = llama_pair(transformers, **overrides)
    ids = random_ids((2, 40), 99)
    mine, theirs = logits_pair(ours, ref, ids)
    assert mine.shape == (2, 40, 99)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=2e-5)


def test_padding_mask_matches_hf(transformers):
    ours, ref = llama_pair(transformers)
    ids = random_ids((3, 7), 99, seed=1)
    mask = np.array([[1] * 7, [0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]])
    mine, theirs = logits_pair(ours, ref, ids, mask)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
    # HF's default (sdpa) attention differs only in rows with every key masked.
    sdpa = llama_pair(transformers, attn_implementation="sdpa")[1]
    with torch.no_grad():
        theirs = sdpa(torch.as_tensor(ids), attention_mask=torch.as_tensor(mask)).logits
    np.testing.assert_allclose(mine[mask == 1], theirs.numpy()[mask == 1], rtol=1e-4,
                               atol=1e-5)


def test_loss_and_gradients_match_hf(transformers):
    ours, ref = llama_pair(transformers)
    ids = random_ids((2, 10), 99, seed=2)
    mask = np.ones_like(ids)
    mask[1, :2] = 0
    labels = ids.copy()
    labels[mask == 0] = -100
    check_loss_and_grads(ours, ref, ids, labels, mask)


def test_rotary_keeps_norms_and_depends_on_distance_only():
    inv = rope_inv_freq(8, {"rope_theta": 10000.0})
    np.testing.assert_allclose(inv, 10000.0 ** (-np.arange(0, 8, 2) / 8), rtol=1e-6)
    rng = np.random.default_rng(0)
    q, k = (lz.Variable(rng.standard_normal((1, 1, 1, 8)).astype(np.float32))
            for _ in range(2))

    def rotated(x, pos):
        cos, sin = rotary_cos_sin(np.array([[pos]]), inv, np.float32)
        return apply_rotary(x, cos, sin).data[0, 0, 0]
    np.testing.assert_allclose(np.linalg.norm(rotated(q, 7)), np.linalg.norm(q.data),
                               rtol=1e-5)
    d1 = rotated(q, 9) @ rotated(k, 4)
    d2 = rotated(q, 25) @ rotated(k, 20)
    np.testing.assert_allclose(d1, d2, rtol=1e-4)
    assert abs(d1 - rotated(q, 9) @ rotated(k, 5)) > 1e-4


def test_config_defaults_and_errors():
    m = models.get_model("llama", **{**SMALL, "num_key_value_heads": None})
    assert m.config.num_key_value_heads == 4 and m.config.head_dim == 8
    assert m.lm_head.weight is not m.model.embed_tokens.weight
    sd = m.state_dict()
    assert sd["model.layers.0.self_attn.k_proj.weight"].shape == (32, 32)
    assert not any("bias" in k or "inv_freq" in k for k in sd)
    with pytest.raises(ValueError, match="multiple of num_key_value_heads"):
        models.get_model("llama", **{**SMALL, "num_key_value_heads": 3})
    with pytest.raises(NotImplementedError, match="yarn"):
        models.get_model("llama", rope_parameters={"rope_type": "yarn"}, **SMALL)
    with pytest.raises(TypeError, match="num_kv_heads"):
        models.get_model("llama", num_kv_heads=2)


def test_config_object_is_accepted(transformers):
    ours, ref = llama_pair(transformers, tie_word_embeddings=True)
    again = models.get_model("llama", config=ref.config)
    assert again.config.num_key_value_heads == 2 and again.config.tie_word_embeddings
    again.load_state_dict(ours.state_dict(), strict=True)
    ids = random_ids((1, 5), 99)
    with lz.no_grad():
        np.testing.assert_allclose(again.eval()(ids).data, ours(ids).data, rtol=1e-6)
