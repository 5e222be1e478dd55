"""Train TextCNN (Kim, 2014) to classify the sentiment of generated reviews.

The sentences come from templates -- "the soup was not very good , but the waiter was
friendly" -- with a subject, an optional negation ("not", "never", "hardly") and an
optional intensifier before a positive or negative adjective, and a neutral clause for
noise.  The label is the adjective's polarity, flipped by a negation: single words do
not decide it, the n-gram "not very good" does, which is what TextCNN's 3-, 4- and
5-word filters (max over time) pick up.  Reports the test accuracy on unseen sentences.

    python examples/train_textcnn.py                      # seconds
    python examples/train_textcnn.py --filters 100 --embed 128 --epochs 10
"""
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.nn.models import get_model

from _common import accuracy, batches, check_args, fit, make_parser, to_device, write_summary
from _lang import optimize

SUBJECTS = ["the soup", "the film", "the hotel", "the service", "the book", "the coffee",
            "our room", "the music", "the staff", "the pizza"]
POSITIVE = ["good", "great", "pleasant", "lovely", "excellent", "tasty", "fun", "clean"]
NEGATIVE = ["bad", "awful", "boring", "dirty", "terrible", "bland", "rude", "noisy"]
NEGATIONS = ["not", "never", "hardly"]
INTENSIFIERS = ["very", "really", "quite", "so", "rather"]
CLAUSES = ["and the waiter was there", "but it rained all day", "as i expected",
           "said my friend", "on a tuesday", "though the price was fair",
           "and we left early", ""]


def review(rng):
    """One generated sentence (a list of words) and its label (1 positive, 0 negative)."""
    positive = rng.random() < 0.5
    adjective = (POSITIVE if positive else NEGATIVE)[rng.integers(8)]
    negated = rng.random() < 0.5
    words = SUBJECTS[rng.integers(10)].split() + ["was"]
    if negated:
        words.append(NEGATIONS[rng.integers(3)])
    if rng.random() < 0.5:
        words.append(INTENSIFIERS[rng.integers(5)])
    words += [adjective] + CLAUSES[rng.integers(len(CLAUSES))].split()
    if rng.random() < 0.3:                      # a neutral lead-in shifts the positions
        words = "to be honest ,".split() + words
    return words, int(positive != negated)


def dataset(n, rng, index, length):
    """(ids (n, length) padded with 0, labels (n,))."""
    x = np.zeros((n, length), np.int64)
    t = np.zeros(n, np.int64)
    for i in range(n):
        words, t[i] = review(rng)
        x[i, :len(words)] = [index[w] for w in words]
    return x, t


def vocabulary():
    words = {w for group in (SUBJECTS, CLAUSES) for s in group for w in s.split()}
    words |= set(POSITIVE + NEGATIVE + NEGATIONS + INTENSIFIERS) | {"was", "to", "be",
                                                                    "honest", ","}
    return ["<pad>"] + sorted(words)


def main():
    p = make_parser("textcnn", __doc__, epochs=5, batch_size=64, lr=2e-3)
    p.add_argument("--train-size", type=int, default=4000, help="generated training reviews")
    p.add_argument("--embed", type=int, default=32, help="word embedding size")
    p.add_argument("--filters", type=int, default=32, help="filters per kernel size")
    p.add_argument("--dropout", type=float, default=0.5, help="dropout before the classifier")
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    vocab = vocabulary()
    index = {w: i for i, w in enumerate(vocab)}
    x_train, t_train = dataset(args.train_size, np.random.default_rng(1), index, 20)
    x_test, t_test = dataset(1000, np.random.default_rng(2), index, 20)
    model = get_model("textcnn", vocab_size=len(vocab), num_classes=2, embed_dim=args.embed,
                      num_filters=args.filters, dropout=args.dropout)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    print(f"TextCNN: {model.num_parameters():,} parameters, vocabulary {len(vocab)}, "
          f"{len(x_train)} training reviews")

    def train_epoch(epoch):
        def loss_of(batch):
            xb, tb = to_device(args, *batch)
            return F.cross_entropy(model(xb), tb)
        return optimize(args, opt, loss_of,
                        batches((x_train, t_train), args.batch_size, args.seed, epoch),
                        -(-len(x_train) // args.batch_size), f"textcnn epoch {epoch + 1}")

    t0 = time.perf_counter()
    fit(args, {"model": model}, {"optimizer": opt}, train_epoch,
        lambda: {"test_acc": accuracy(model, x_test, t_test, args)})
    acc = accuracy(model, x_test, t_test, args)
    example, label = review(np.random.default_rng(99))
    ids = np.array([[index[w] for w in example] + [0] * (20 - len(example))])
    with lz.no_grad():
        guess = int(model.eval()(to_device(args, ids)).data.argmax())
    print(f"{' '.join(example)!r}: predicted {'positive' if guess else 'negative'}, "
          f"truly {'positive' if label else 'negative'}")
    print(f"test accuracy {acc:.3f} on 1000 unseen reviews")
    write_summary(args, "textcnn", "sentence classification (sentiment with negation)",
                  "generated reviews", "test_acc", acc, time.perf_counter() - t0,
                  parameters=model.num_parameters())


if __name__ == "__main__":
    main()
