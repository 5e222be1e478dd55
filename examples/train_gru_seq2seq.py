"""Train a GRU encoder-decoder with Bahdanau attention to normalise dates.

A generated task: dates written in one of several human formats ("march 5, 2019",
"5 mar 2019", "05/03/2019", "tuesday, 5 march 2019" ...) become ISO dates
("2019-03-05").  Characters in, characters out; the source is padded on the right
(masked in the attention), the decoder trains with teacher forcing and is evaluated by
greedy decoding: the exact-match accuracy is the fraction of held-out dates it gets
entirely right.

    python examples/train_gru_seq2seq.py                  # about a minute on one core
    python examples/train_gru_seq2seq.py --hidden 128 --epochs 20
"""
import datetime
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.nn.models import get_model

from _common import batches, check_args, fit, make_parser, to_device, write_summary
from _lang import optimize

PAD, BOS, EOS = 0, 1, 2
FORMATS = ["%B %d, %Y", "%d %B %Y", "%d %b %Y", "%b %d %Y", "%d/%m/%Y", "%Y.%m.%d",
           "%A, %d %B %Y", "%a %d %b %Y", "%d.%m.%y", "%B %Y, %d"]


def random_dates(n, rng):
    """``n`` (written, iso) pairs of dates between 1950 and 2049."""
    start = datetime.date(1950, 1, 1).toordinal()
    days = rng.integers(0, 36500, n)
    out = []
    for d, f in zip(days, rng.integers(0, len(FORMATS), n)):
        date = datetime.date.fromordinal(start + int(d))
        text = date.strftime(FORMATS[f]).lower()
        if rng.random() < 0.5:
            text = text.replace(" 0", " ", 1)     # "march 05" and "march 5" both occur
        out.append((text, date.isoformat()))
    return out


def encode(pairs, src_index, tgt_index):
    """Padded (src, tgt) id arrays; tgt = BOS + iso + EOS."""
    src = np.zeros((len(pairs), max(len(s) for s, _ in pairs)), np.int64)
    tgt = np.zeros((len(pairs), 12), np.int64)
    for i, (s, t) in enumerate(pairs):
        src[i, :len(s)] = [src_index[c] for c in s]
        tgt[i] = [BOS] + [tgt_index[c] for c in t] + [EOS]
    return src, tgt


def exact_match(model, src, tgt, args):
    out = model.greedy_decode(to_device(args, src), BOS, EOS, max_len=11)
    return float(np.mean([np.array_equal(o[:11], t[1:12]) for o, t in zip(out, tgt)]))


def main():
    p = make_parser("gru_seq2seq", __doc__, epochs=5, batch_size=64, lr=3e-3)
    p.add_argument("--train-size", type=int, default=3000, help="generated training dates")
    p.add_argument("--embed", type=int, default=24, help="character embedding size")
    p.add_argument("--hidden", type=int, default=64, help="GRU hidden size")
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    train = random_dates(args.train_size, np.random.default_rng(1))
    test = random_dates(500, np.random.default_rng(2))
    src_chars = sorted({c for s, _ in train + test for c in s})
    src_index = {c: i + 1 for i, c in enumerate(src_chars)}
    tgt_index = {c: i + 3 for i, c in enumerate("0123456789-")}
    (x_train, y_train), (x_test, y_test) = (encode(d, src_index, tgt_index)
                                            for d in (train, test))
    model = get_model("gru_seq2seq", src_vocab=len(src_chars) + 1, tgt_vocab=14,
                      embed_dim=args.embed, hidden_size=args.hidden, attn_dim=args.hidden)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    print(f"GRU seq2seq: {model.num_parameters():,} parameters; e.g. {train[0][0]!r} -> "
          f"{train[0][1]!r}")

    def loss_of(batch):
        xb, yb = to_device(args, *batch)
        logits = model(xb, yb[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 14), yb[:, 1:].reshape(-1))

    def train_epoch(epoch):
        return optimize(args, opt, loss_of,
                        batches((x_train, y_train), args.batch_size, args.seed, epoch),
                        -(-len(x_train) // args.batch_size), f"seq2seq epoch {epoch + 1}",
                        clip=list(model.parameters()))

    t0 = time.perf_counter()
    fit(args, {"model": model}, {"optimizer": opt}, train_epoch,
        lambda: {"exact_match": exact_match(model, x_test[:200], y_test[:200], args)})
    em = exact_match(model, x_test, y_test, args)
    digits = "0123456789-"
    out = model.greedy_decode(to_device(args, x_test[:3]), BOS, EOS, max_len=11)
    for (s, t), o in zip(test[:3], out):
        print(f"  {s!r:28} -> {''.join(digits[i - 3] for i in o if i >= 3)!r} (want {t!r})")
    print(f"exact match {em:.3f} on 500 held-out dates")
    write_summary(args, "gru_seq2seq", "date normalisation (seq2seq with attention)",
                  "generated dates in 10 formats", "exact_match", em,
                  time.perf_counter() - t0, parameters=model.num_parameters())


if __name__ == "__main__":
    main()
