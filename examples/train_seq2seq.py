"""Train a Transformer encoder-decoder (``nn.Transformer``) to reverse digit strings.

A generated task that needs attention across the whole input: the source is a random
string of digits of varying length, the target the same digits reversed.  Sequences are
padded, padding is masked in attention and ignored by the loss, and the decoder trains
with teacher forcing; evaluation decodes greedily and counts exact matches.

    python examples/train_seq2seq.py                      # seconds
    python examples/train_seq2seq.py --max-len 20 --d-model 256 --layers 3 --epochs 30
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, optim
from lezero.nn.models import Seq2SeqTransformer

from _common import smoke_limit, check_args, fit, make_parser, mean, to_device, write_summary

PAD, BOS, EOS, FIRST_DIGIT = 0, 1, 2, 3
VOCAB = FIRST_DIGIT + 10


def make_pairs(n, min_len, max_len, rng):
    """``n`` (source, target) pairs as padded int arrays: source (n, max_len) digits,
    target (n, max_len + 2) = BOS, reversed digits, EOS."""
    src = np.full((n, max_len), PAD, np.int64)
    tgt = np.full((n, max_len + 2), PAD, np.int64)
    for i, length in enumerate(rng.integers(min_len, max_len + 1, n)):
        digits = rng.integers(0, 10, length) + FIRST_DIGIT
        src[i, :length] = digits
        tgt[i, :length + 2] = np.concatenate([[BOS], digits[::-1], [EOS]])
    return src, tgt


def digits_text(ids):
    """The digits of a token sequence as a string (special tokens dropped)."""
    return "".join(str(int(i) - FIRST_DIGIT) for i in cuda.as_numpy(ids)
                   if int(i) >= FIRST_DIGIT)


def exact_match(model, src, tgt, args):
    """Fraction of sources whose greedy decoding equals the target up to EOS."""
    src = to_device(args, src)
    out = cuda.as_numpy(model.greedy_decode(src, tgt.shape[1], BOS, EOS, src == PAD))
    hits = 0
    for pred, want in zip(out, tgt):
        n = int(np.argmax(want == EOS)) + 1
        hits += pred.shape[0] >= n and np.array_equal(pred[:n], want[:n])
    return hits / len(src)


def main():
    p = make_parser("seq2seq", __doc__, epochs=12, batch_size=64, lr=2e-3)
    p.add_argument("--steps", type=int, default=50, help="optimizer steps per epoch")
    p.add_argument("--min-len", type=int, default=3,
                   help="shortest source string")
    p.add_argument("--max-len", type=int, default=8,
                   help="longest source string")
    p.add_argument("--d-model", type=int, default=64,
                   help="embedding width")
    p.add_argument("--heads", type=int, default=4,
                   help="attention heads")
    p.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    p.add_argument("--ff", type=int, default=128, help="feed-forward width")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="dropout inside the Transformer")
    args = check_args(p, p.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    model = Seq2SeqTransformer(VOCAB, VOCAB, args.d_model, args.heads, args.layers,
                               args.layers, args.ff, args.dropout,
                               max_len=args.max_len + 2)
    opt = optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))
    test_src, test_tgt = make_pairs(200, args.min_len, args.max_len,
                                    np.random.default_rng(10_000 + args.seed))
    print(f"Seq2SeqTransformer: {model.num_parameters():,} parameters; reversing "
          f"{args.min_len}-{args.max_len} digit strings")

    def train_epoch(epoch):
        rng = np.random.default_rng([args.seed, epoch])
        losses = []
        for _ in smoke_limit(range(args.steps)):
            src, tgt = make_pairs(args.batch_size, args.min_len, args.max_len, rng)
            src, tgt = to_device(args, src, tgt)
            logits = model(src, tgt[:, :-1], src_key_padding_mask=src == PAD,
                           tgt_key_padding_mask=tgt[:, :-1] == PAD)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1),
                                   ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return {"loss": mean(losses)}

    def evaluate():
        return {"exact_match": exact_match(model, test_src, test_tgt, args)}

    history = fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate)
    if history:
        write_summary(args, "seq2seq_transformer", "sequence to sequence: reverse digits",
                      f"generated {args.min_len}-{args.max_len} digit strings", "exact_match",
                      history[-1]["exact_match"], sum(e["seconds"] for e in history),
                      parameters=model.num_parameters(), epochs=len(history))
    src = to_device(args, test_src[:3])
    for s, pred in zip(src, model.greedy_decode(src, test_tgt.shape[1], BOS, EOS, src == PAD)):
        print(f"  {digits_text(s):>{args.max_len}} -> {digits_text(pred)}")


if __name__ == "__main__":
    main()
