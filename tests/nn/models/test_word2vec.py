"""word2vec (skip-gram, negative sampling): the loss against a hand computation, the
data pieces (vocabulary, windows, unigram^0.75 sampler), and a nearest-neighbour check:
trained on sentences whose slots hold words of one category, each word's nearest
neighbour shares its category."""
import numpy as np
import pytest

import lezero as lz
from lezero import optim
from lezero.nn import models
from lezero.nn.models.word2vec import (NegativeSampler, build_vocab, skipgram_pairs,
                                       subsample, tokenize)

CATEGORIES = {"animal": "cat dog horse cow sheep goat", "food": "bread apple cheese fish rice",
              "colour": "red blue green yellow white", "place": "garden kitchen market river"}
TEMPLATES = ["the {colour} {animal} ate the {food} in the {place}",
             "a {animal} found {food} by the {place}", "my {colour} {animal} likes {food}",
             "we walked to the {place} with a {colour} {animal}"]


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_loss_matches_a_hand_computation():
    lz.manual_seed(0)
    m = models.get_model("word2vec", vocab_size=10, embedding_dim=4)
    m.out_embed.weight.data[:] = np.random.default_rng(0).standard_normal((10, 4))
    c, o, neg = np.array([1, 2]), np.array([3, 4]), np.array([[5, 6, 7], [8, 9, 0]])
    v, u = m.in_embed.weight.data, m.out_embed.weight.data
    want = np.mean([-np.log(sigmoid(u[o[i]] @ v[c[i]]))
                    - sum(np.log(sigmoid(-u[n] @ v[c[i]])) for n in neg[i]) for i in range(2)])
    np.testing.assert_allclose(m(c, o, neg).item(), want, rtol=1e-5)


def test_vocabulary_windows_and_sampler():
    words, counts = build_vocab(tokenize("b a c a b a, D'oh d'oh"))
    assert words == ["a", "b", "d'oh", "c"] and list(counts) == [3, 2, 2, 1]
    assert build_vocab(["x", "y", "x"], min_count=2)[0] == ["x"]
    ids = np.arange(6)
    c, o = skipgram_pairs(ids, 2, np.random.default_rng(0))
    assert set(np.abs(c - o)) <= {1, 2}
    both = {(int(a), int(b)) for a, b in zip(c, o)}
    assert all((i, i + 1) in both and (i + 1, i) in both for i in range(5))   # reach >= 1
    draws = NegativeSampler([81, 16, 1])((100000,), np.random.default_rng(0))
    want = np.array([27, 8, 1]) / 36.0                                     # counts ** 0.75
    np.testing.assert_allclose(np.bincount(draws) / 1e5, want, atol=0.01)
    kept = subsample(np.array([0] * 999 + [1]), np.array([999, 1]),
                     np.random.default_rng(0), t=1e-3)
    # kept with probability sqrt(t / f): 1 for the rare word, ~0.032 for the common one
    assert (kept == 1).sum() == 1 and 15 < (kept == 0).sum() < 55


def test_nearest_neighbours_share_a_category():
    rng = np.random.default_rng(0)
    cats = {k: v.split() for k, v in CATEGORIES.items()}
    text = " . ".join(TEMPLATES[rng.integers(4)].format(
        **{k: v[rng.integers(len(v))] for k, v in cats.items()}) for _ in range(500))
    toks = tokenize(text)
    words, counts = build_vocab(toks)
    index = {w: i for i, w in enumerate(words)}
    ids = np.array([index[w] for w in toks])
    lz.manual_seed(0)
    m = models.get_model("word2vec", vocab_size=len(words), embedding_dim=16)
    opt = optim.Adam(m.parameters(), lr=0.02)
    negatives = NegativeSampler(counts)
    for _ in range(12):
        c, o = skipgram_pairs(ids, 2, rng)
        order = rng.permutation(len(c))
        for i in range(0, len(c), 512):
            b = order[i:i + 512]
            loss = m(c[b], o[b], negatives((len(b), 5), rng))
            opt.zero_grad()
            loss.backward()
            opt.step()
    category = {w: k for k, ws in cats.items() for w in ws}
    hits = [category.get(words[m.most_similar(index[w], 1)[0]]) == category[w]
            for w in category]
    assert np.mean(hits) >= 0.9, hits


def test_errors():
    with pytest.raises(ValueError, match="window"):
        skipgram_pairs(np.arange(5), 0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="text"):
        tokenize(["a list"])
    with pytest.raises(TypeError, match="embedding_dim"):
        models.get_model("word2vec", vocab_size=5, embedding_dim=2.5)
