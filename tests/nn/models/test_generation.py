"""Generation for GPT-2 and LLaMA: the KV cache gives the uncached logits and tokens
(written into a buffer without gradients, concatenated with them), HF's warpers
(temperature, top-k, top-p) keep the right tokens, padding and eos work, and
``logits_to_keep`` gives the last positions' logits."""
import numpy as np
import pytest

import lezero as lz
from lezero.nn import models
from lezero.nn.models.generation import KVCache, filter_logits, sample_next

GPT2 = dict(vocab_size=53, n_embd=32, n_layer=2, n_head=4, n_positions=40)
LLAMA = dict(vocab_size=53, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=48)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def model(request):
    lz.manual_seed(0)
    m = models.get_model(request.param, **(GPT2 if request.param == "gpt2" else LLAMA))
    return m.eval()


def test_cached_steps_give_the_full_forward_logits(model):
    ids = np.random.default_rng(0).integers(0, 53, (2, 9))
    with lz.no_grad():
        full = model(ids).data
        cache = KVCache()
        parts = [model(ids[:, :5], past_key_values=cache).data]
        parts.append(model(ids[:, 5:7], past_key_values=cache).data)   # two at once
        for t in (7, 8):
            parts.append(model(ids[:, t:t + 1], past_key_values=cache).data)
    assert cache.get_seq_length() == 9 and len(cache) == 2
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=1e-4, atol=1e-5)


def test_cache_writes_into_a_buffer_without_gradients():
    rng = np.random.default_rng(6)
    k = [rng.standard_normal((2, 3, t, 4)).astype(np.float32) for t in (2, 1, 3)]
    v = [x + 1 for x in k]
    cache = KVCache(max_length=3)
    with lz.no_grad():
        first = cache.update(0, lz.Variable(k[0]), lz.Variable(v[0]))
        cache.update(0, lz.Variable(k[1]), lz.Variable(v[1]))
        room = cache._room[0][0]
        assert room.shape == (2, 3, 3, 4)              # max_length positions at first
        got_k, got_v = cache.update(0, k[2], v[2])     # past room: doubled, past kept
    assert cache._room[0][0].shape == (2, 3, 6, 4) and cache.get_seq_length() == 6
    np.testing.assert_array_equal(got_k.data, np.concatenate(k, axis=2))
    np.testing.assert_array_equal(got_v.data, np.concatenate(v, axis=2))
    assert np.shares_memory(got_k.data, cache._room[0][0])     # a view: no copy per step
    np.testing.assert_array_equal(first[0].data, k[0])          # earlier views stay valid
    with pytest.raises(IndexError, match="layer 2"):
        cache.update(2, k[0], v[0])
    with pytest.raises(ValueError, match="max_length"):
        KVCache(max_length=0)


def test_cache_concatenates_with_gradients():
    k0, k1 = (lz.Variable(np.full((1, 1, t, 2), t, np.float32)) for t in (2, 1))
    cache = KVCache()
    cache.update(0, k0, k0)
    k, _ = cache.update(0, k1, k1 * 2.0)
    (k * k).sum().backward()
    np.testing.assert_array_equal(k0.grad.data, 2 * k0.data)    # gradient reaches the past
    assert cache._room[0] is None


def test_logits_to_keep_gives_the_last_positions():
    lz.manual_seed(0)
    m = models.get_model("gpt2", **GPT2).eval()
    ids = np.random.default_rng(7).integers(0, 53, (2, 6))
    with lz.no_grad():
        full = m(ids).data
        last = m(ids, logits_to_keep=2).data
    np.testing.assert_allclose(last, full[:, -2:], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="logits_to_keep"):
        m(ids, logits_to_keep=-1)


@pytest.mark.parametrize("sampling", [dict(), dict(do_sample=True, temperature=0.7,
                                                   top_k=10, top_p=0.9)])
def test_cached_generation_equals_uncached(model, sampling):
    prompt = np.random.default_rng(1).integers(0, 53, (2, 3))
    lz.manual_seed(5)
    cached = model.generate(prompt, 12, use_cache=True, **sampling)
    lz.manual_seed(5)
    plain = model.generate(prompt, 12, use_cache=False, **sampling)
    assert cached.shape == (2, 15)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_array_equal(cached[:, :3], prompt)


def test_left_padded_rows_generate_as_if_alone(model):
    prompt = np.random.default_rng(2).integers(1, 53, (1, 4))
    alone = model.generate(prompt, 6)
    batch = np.concatenate([np.concatenate([[[0, 0]], prompt], axis=1),
                            np.random.default_rng(3).integers(1, 53, (1, 6))])
    mask = np.ones_like(batch)
    mask[0, :2] = 0
    out = model.generate(batch, 6, attention_mask=mask)
    np.testing.assert_array_equal(out[0, 2:], alone[0])


def test_eos_pads_finished_rows(model):
    prompt = np.random.default_rng(4).integers(0, 53, (2, 3))
    greedy = model.generate(prompt, 6)
    eos = int(greedy[0, 4])                 # the second token row 0 would produce
    out = model.generate(prompt, 6, eos_token_id=eos, pad_token_id=52)
    first = int(np.argmax(out[0, 3:] == eos))
    assert (out[0, 4 + first:] == 52).all()


def test_filter_logits_follows_hf_warpers():
    logits = np.log(np.array([[0.5, 0.2, 0.15, 0.1, 0.05]]))
    np.testing.assert_allclose(filter_logits(logits, temperature=2.0), logits / 2)
    kept = np.isfinite(filter_logits(logits, top_k=2))
    np.testing.assert_array_equal(kept, [[True, True, False, False, False]])
    # top_p=0.8: 0.5 + 0.2 < 0.8, so 0.15 is needed too; 0.1 and 0.05 go.
    kept = np.isfinite(filter_logits(logits, top_p=0.8))
    np.testing.assert_array_equal(kept, [[True, True, True, False, False]])
    kept = np.isfinite(filter_logits(logits, top_p=0.3))
    np.testing.assert_array_equal(kept, [[True, False, False, False, False]])
    with pytest.raises(ValueError, match="temperature"):
        filter_logits(logits, temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        filter_logits(logits, top_p=1.5)


def test_sample_next_draws_in_proportion():
    probs = np.array([0.6, 0.3, 0.1, 0.0])
    with np.errstate(divide="ignore"):
        logits = np.log(np.tile(probs, (20000, 1)))
    draws = sample_next(logits, np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 20000, probs, atol=0.015)


def test_generate_rejects_bad_arguments(model):
    with pytest.raises(TypeError, match="input_ids"):
        model.generate(np.array([[0.5]]), 2)
    with pytest.raises(ValueError, match="left"):
        model.generate(np.array([[1, 2]]), 2, attention_mask=np.array([[1, 0]]))
    with pytest.raises(ValueError, match="top_k"):
        model.generate(np.array([[1, 2]]), 2, do_sample=True, top_k=0)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_cupy_logits_and_generation_match_numpy(name):
    import cupy
    lz.manual_seed(0)
    m = models.get_model(name, **(GPT2 if name == "gpt2" else LLAMA)).eval()
    ids = np.random.default_rng(0).integers(0, 53, (2, 7))
    with lz.no_grad():
        cpu = m(ids).data
    want = m.generate(ids[:, :3], 6)
    m.to_gpu()
    with lz.no_grad():
        gpu = cupy.asnumpy(m(cupy.asarray(ids)).data)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(m.generate(cupy.asarray(ids[:, :3]), 6), want)
