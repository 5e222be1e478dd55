"""Train word2vec (skip-gram with negative sampling) on LeZero's shipped story.

Words are lower-cased tokens of the story; the first 90% trains, the last 10% is held
out.  Each pass over the text draws the (centre, context) pairs afresh (Mikolov's random window,
frequent words subsampled) and 5 negatives per pair from the unigram distribution to
the 3/4.  The result is measured on the held-out text: how often a real (centre,
context) pair scores higher than the centre with a random word (the pair AUC; 0.5 is
chance).  At the end the nearest neighbours of a few words are printed.

    python examples/train_word2vec.py                     # seconds
    python examples/train_word2vec.py --text book.txt --dim 100 --window 5 --epochs 20
"""
import time

import numpy as np

import lezero as lz
from lezero import optim
from lezero.data.datasets import load_corpus
from lezero.nn.models import get_model
from lezero.nn.models.word2vec import (NegativeSampler, build_vocab, skipgram_pairs,
                                       subsample, tokenize)

from _common import check_args, fit, make_parser, smoke_limit, write_summary
from _lang import optimize


def pair_auc(model, ids, args, negatives, rng):
    """P(score of a held-out pair > score of the centre with a sampled word)."""
    c, o = skipgram_pairs(ids, args.window, rng)
    pos = model.score(c, o)
    neg = model.score(c, negatives((len(c),), rng))
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg).mean())


def main():
    p = make_parser("word2vec", __doc__, epochs=15, batch_size=256, lr=0.01)
    p.add_argument("--passes", type=int, default=10,
                   help="passes over the text per epoch (the story is short)")
    p.add_argument("--text", help="a UTF-8 text file (default: LeZero's shipped story)")
    p.add_argument("--dim", type=int, default=16, help="embedding size")
    p.add_argument("--window", type=int, default=3, help="largest context distance")
    p.add_argument("--negatives", type=int, default=5, help="negative words per pair")
    p.add_argument("--min-count", type=int, default=2, help="rarer words are dropped")
    p.add_argument("--subsample", type=float, default=1.0,
                   help="Mikolov's t: words more frequent than t are thinned out (1: keep "
                        "all, best for a corpus this small; large corpora use 1e-5)")
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    text = open(args.text, encoding="utf-8").read() if args.text else load_corpus()
    tokens = tokenize(text)
    cut = int(0.9 * len(tokens))
    words, counts = build_vocab(tokens[:cut], args.min_count)
    index = {w: i for i, w in enumerate(words)}
    train = np.array([index[w] for w in tokens[:cut] if w in index])
    held = np.array([index[w] for w in tokens[cut:] if w in index])
    model = get_model("word2vec", vocab_size=len(words), embedding_dim=args.dim)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    negatives = NegativeSampler(counts)
    print(f"word2vec: {len(tokens)} words, vocabulary {len(words)} (min count "
          f"{args.min_count}), {model.num_parameters():,} parameters")

    def train_epoch(epoch):
        """``--passes`` times: fresh (subsampled, windowed) pairs, shuffled, in batches."""
        rng = np.random.default_rng([args.seed, epoch])
        batches = []
        for _ in range(1 if args.smoke else args.passes):
            c, o = skipgram_pairs(subsample(train, counts, rng, args.subsample),
                                  args.window, rng)
            order = rng.permutation(len(c))
            batches += [(c[order[i:i + args.batch_size]], o[order[i:i + args.batch_size]])
                        for i in range(0, len(c), args.batch_size)]

        def loss_of(batch):
            centre, context = batch
            return model(centre, context, negatives((len(centre), args.negatives), rng))
        metrics = optimize(args, opt, loss_of, smoke_limit(batches), len(batches),
                           f"word2vec epoch {epoch + 1}")
        return {**metrics, "pairs": sum(len(b[0]) for b in batches)}

    t0 = time.perf_counter()
    fit(args, {"model": model}, {"optimizer": opt}, train_epoch,
        lambda: {"heldout_auc": pair_auc(model, held, args, negatives,
                                         np.random.default_rng(1))})
    seconds = time.perf_counter() - t0
    auc = pair_auc(model, held, args, negatives, np.random.default_rng(1))
    for w in [w for w in ("lamp", "street", "night", "oil", "river", "light") if w in index]:
        print(f"  {w:8s} -> {', '.join(words[i] for i in model.most_similar(index[w], 5))}")
    print(f"held-out pair AUC {auc:.3f} (chance 0.5): real contexts outscore random words")
    write_summary(args, "word2vec", "word embeddings (skip-gram, negative sampling)",
                  "shipped story (words)", "heldout_pair_auc", auc, seconds,
                  vocabulary=len(words), parameters=model.num_parameters())


if __name__ == "__main__":
    main()
