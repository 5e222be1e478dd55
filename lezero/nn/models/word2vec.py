"""word2vec: skip-gram with negative sampling (Mikolov et al., 2013).

Each word has two vectors: ``in_embed`` (the word as a centre, the embedding one keeps)
and ``out_embed`` (the word as a context).  For a centre word c, a context word o seen
near it and k "negative" words drawn from the unigram distribution raised to 3/4, the
loss is

    -log sigmoid(u_o . v_c) - sum_k log sigmoid(-u_k . v_c)

so words that share contexts end up with nearby ``in_embed`` vectors.  The data side is
here too: ``tokenize``, ``build_vocab``, ``subsample`` (frequent words dropped with
probability 1 - sqrt(t / f)), ``skipgram_pairs`` (Mikolov's shrunk random window) and
``NegativeSampler``.
"""
import re
from collections import Counter

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["SkipGram", "tokenize", "build_vocab", "subsample", "skipgram_pairs",
           "NegativeSampler"]


def tokenize(text):
    """Lower-case words (letters and apostrophes) of ``text``, in order."""
    check_type("tokenize", "text", text, str)
    return re.findall(r"[a-z']+", text.lower())


def build_vocab(tokens, min_count=1):
    """``(words, counts)``: the words seen at least ``min_count`` times, most frequent
    first (ties alphabetical), and their counts (int64)."""
    min_count = check_int("build_vocab", "min_count", min_count, low=1)
    counts = Counter(tokens)
    words = sorted((w for w, c in counts.items() if c >= min_count),
                   key=lambda w: (-counts[w], w))
    return words, np.array([counts[w] for w in words], dtype=np.int64)


def subsample(ids, counts, rng, t=1e-3):
    """``ids`` without some occurrences of frequent words: id w is kept with probability
    min(1, sqrt(t / f_w)), f_w its frequency (Mikolov's rule; ``t`` is larger than the
    paper's 1e-5 because small corpora have few words)."""
    freq = counts / counts.sum()
    keep = np.minimum(1.0, np.sqrt(check_number("subsample", "t", t, low=0.0,
                                                low_open=True) / freq))
    return ids[rng.random(len(ids)) < keep[ids]]


def skipgram_pairs(ids, window, rng):
    """(centre, context) id pairs: around each position a window of size b, drawn
    uniformly from 1..``window`` per position (nearer words count more often)."""
    window = check_int("skipgram_pairs", "window", window, low=1)
    ids = np.asarray(ids)
    n = len(ids)
    reach = rng.integers(1, window + 1, n)
    centres, contexts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for offset in range(1, min(window, n - 1) + 1):
        right = np.flatnonzero(reach[:n - offset] >= offset)           # context i + offset
        left = np.flatnonzero(reach[offset:] >= offset) + offset       # context i - offset
        centres += [ids[right], ids[left]]
        contexts += [ids[right + offset], ids[left - offset]]
    return (np.concatenate(centres).astype(np.int64),
            np.concatenate(contexts).astype(np.int64))


class NegativeSampler:
    """Draws word ids with probability proportional to count ** ``power``."""

    def __init__(self, counts, power=0.75):
        weights = np.asarray(counts, dtype=np.float64) ** power
        self.cdf = np.cumsum(weights / weights.sum())

    def __call__(self, shape, rng):
        draws = np.searchsorted(self.cdf, rng.random(shape), side="right")
        return np.minimum(draws, len(self.cdf) - 1).astype(np.int64)


@register_model("word2vec")
class SkipGram(nn.Module):
    """Skip-gram with negative sampling: ``in_embed`` and ``out_embed``
    (vocab_size, embedding_dim).

    ``forward(centre, context, negatives)`` (ids (B,), (B,), (B, k)) returns the mean
    negative-sampling loss; ``similarity(ids)`` the cosine similarities of those words'
    vectors to every word; ``most_similar(word_id, n)`` the n nearest ids (itself left
    out).  Initialised as the original C code: ``in_embed`` uniform in +-0.5 / dim,
    ``out_embed`` zero.
    """

    def __init__(self, vocab_size, embedding_dim=64):
        super().__init__()
        vocab_size = check_int("SkipGram", "vocab_size", vocab_size, low=1)
        embedding_dim = check_int("SkipGram", "embedding_dim", embedding_dim, low=1)
        self.in_embed = nn.Embedding(vocab_size, embedding_dim)
        self.out_embed = nn.Embedding(vocab_size, embedding_dim)
        nn.init.uniform_(self.in_embed.weight, -0.5 / embedding_dim, 0.5 / embedding_dim)
        nn.init.zeros_(self.out_embed.weight)

    def forward(self, centre, context, negatives):
        v = self.in_embed(centre)                                   # (B, D)
        u_pos = self.out_embed(context)                             # (B, D)
        u_neg = self.out_embed(negatives)                           # (B, k, D)
        pos = F.sum(v * u_pos, axis=-1)
        neg = F.sum(u_neg * F.expand_dims(v, 1), axis=-1)           # (B, k)
        loss = -F.logsigmoid(pos) - F.sum(F.logsigmoid(-neg), axis=-1)
        return F.mean(loss)

    def score(self, centre, context):
        """u_context . v_centre for id arrays of one shape (no graph)."""
        with lz.no_grad():
            return F.sum(self.in_embed(centre) * self.out_embed(context), axis=-1).data

    def similarity(self, ids):
        """Cosine similarity of the words ``ids`` to every word, (len(ids), vocab)."""
        w = self.in_embed.weight.data
        xp = cuda.get_array_module(w)
        unit = w / xp.maximum(xp.linalg.norm(w, axis=1, keepdims=True), 1e-12)
        return unit[xp.asarray(ids)] @ unit.T

    def most_similar(self, word_id, n=5):
        """The ``n`` word ids nearest to ``word_id`` by cosine, nearest first."""
        sims = cuda.as_numpy(self.similarity([word_id]))[0]
        sims[word_id] = -np.inf
        return [int(i) for i in np.argsort(-sims, kind="stable")[:n]]
