"""GPT2LMHeadModel against Hugging Face's: HF's state_dict (Conv1D weights stored
(in, out)) loads as-is, the logits agree with and without left padding, and so do the
loss and every gradient; greedy generation picks HF's tokens."""
import numpy as np
import pytest
import torch

from lezero.nn import models

from tests.nn.models.hf_parity import (build_pair, check_loss_and_grads, logits_pair,
                                       random_ids, transformers)  # noqa: F401

SMALL = dict(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=24,
             bos_token_id=0, eos_token_id=0)


def gpt2_pair(transformers, **overrides):
    return build_pair(transformers, "GPT2Config", "GPT2LMHeadModel", "gpt2",
                      **{**SMALL, **overrides})


@pytest.mark.parametrize("overrides", [
    {}, dict(tie_word_embeddings=False),
    dict(n_inner=40, activation_function="relu", scale_attn_by_inverse_layer_idx=True,
         layer_norm_epsilon=1e-3)], ids=["tied", "untied", "variant"])
def test_logits_match_hf(transformers, overrides):
    ours, ref = gpt2_pair(transformers, **overrides)
    ids = random_ids((2, 9), 99)
    mine, theirs = logits_pair(ours, ref, ids)
    assert mine.shape == (2, 9, 99)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


def test_conv1d_layout_is_in_by_out():
    m = models.get_model("gpt2", **SMALL)
    sd = m.state_dict()
    assert sd["transformer.h.0.attn.c_attn.weight"].shape == (32, 96)
    assert sd["transformer.h.0.mlp.c_proj.weight"].shape == (128, 32)
    assert m.lm_head.weight is m.transformer.wte.weight and "lm_head.weight" in sd


def test_left_padding_matches_hf(transformers):
    ours, ref = gpt2_pair(transformers)
    ids = random_ids((3, 6), 99, seed=2)
    mask = np.array([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])
    mine, theirs = logits_pair(ours, ref, ids, mask)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


def test_loss_and_gradients_match_hf(transformers):
    ours, ref = gpt2_pair(transformers, tie_word_embeddings=True)
    ids = random_ids((2, 8), 99, seed=4)
    labels = ids.copy()
    labels[0, :3] = -100
    check_loss_and_grads(ours, ref, ids, labels)


def test_greedy_generation_matches_hf(transformers):
    ours, ref = gpt2_pair(transformers)
    prompt = random_ids((2, 4), 99, seed=5)
    mine = ours.generate(prompt, max_new_tokens=8)
    theirs = ref.generate(torch.as_tensor(prompt), max_new_tokens=8, do_sample=False,
                          min_new_tokens=8, pad_token_id=0).numpy()
    np.testing.assert_array_equal(mine, theirs)


def test_config_aliases_and_errors():
    m = models.get_model("gpt2", vocab_size=50, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=8)
    assert m.config.n_embd == 16 and m.config.n_positions == 8 and len(m.transformer.h) == 1
    with pytest.raises(TypeError, match="n_emdb"):
        models.get_model("gpt2", n_emdb=16)
    with pytest.raises(ValueError, match="divisible"):
        models.get_model("gpt2", n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="n_positions|max_position"):
        m(np.ones((1, 9), np.int64))


def test_conv1d_one_gemm_paths_agree():
    """Conv1D runs one GEMM over the merged rows (linear with the weight's transpose),
    a one-row input and autocast the plain matmul: all give x @ weight + bias."""
    import lezero as lz
    from lezero import amp
    from lezero.nn.models.gpt2 import Conv1D
    layer = Conv1D(6, 4)
    layer.bias.data[...] = np.arange(6, dtype=np.float32)
    x = np.random.default_rng(0).standard_normal((3, 2, 4)).astype(np.float32)
    want = x @ layer.weight.data + layer.bias.data
    np.testing.assert_allclose(layer(x).data, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer(x[:1, :1]).data, want[:1, :1], rtol=1e-5, atol=1e-6)
    with amp.autocast("bfloat16"):
        low = layer(lz.Variable(x))
    assert low.dtype != np.float32                     # autocast lowered the product
    np.testing.assert_allclose(np.asarray(low.data, np.float32), want, rtol=0.05, atol=0.05)
    loss = layer(lz.Variable(x)).sum()
    loss.backward()
    np.testing.assert_allclose(layer.weight.grad.data, np.broadcast_to(
        x.reshape(-1, 4).sum(0)[:, None], (4, 6)), rtol=1e-5)
