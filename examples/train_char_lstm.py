"""Train a character-level LSTM language model with truncated backpropagation through
time, then sample from it.

The text is cut into ``--batch-size`` parallel streams; each step reads ``--bptt``
characters of every stream, carries the LSTM state over to the next window and detaches
it there, so gradients flow through at most ``--bptt`` steps while the state remembers
the whole stream.

    python examples/train_char_lstm.py                        # seconds, shipped story
    python examples/train_char_lstm.py --text input.txt --hidden 512 --layers 2 \\
        --epochs 30 --bptt 100 --dropout 0.2
"""
import math
import os

import numpy as np

import lezero.functions as F
from lezero import optim
from lezero.nn.models import CharLSTM

from _common import (smoke_limit, char_corpus, check_args, fit, make_parser, mean, to_device,
                     write_json, write_summary)


def streams(ids, batch_size):
    """(batch_size, L): the text cut into equal parallel streams (the rest dropped)."""
    length = len(ids) // batch_size
    return ids[:length * batch_size].reshape(batch_size, length)


def run_streams(model, data, bptt, args, opt=None, clip=None):
    """One pass over the streams; trains when ``opt`` is given.  Returns the mean loss."""
    hidden, losses = None, []
    for i in smoke_limit(range(0, data.shape[1] - 1, bptt)):
        n = min(bptt, data.shape[1] - 1 - i)
        x, y = to_device(args, data[:, i:i + n], data[:, i + 1:i + 1 + n])
        logits, hidden = model(x, hidden)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm_(model.parameters(), clip)
            opt.step()
        hidden = CharLSTM.detach_hidden(hidden)      # the next window's graph starts here
        losses.append(loss.item())
    return mean(losses)


def main():
    p = make_parser("char_lstm", __doc__, epochs=30, batch_size=16, lr=5e-3)
    p.add_argument("--text", help="a UTF-8 text file (default: LeZero's shipped story)")
    p.add_argument("--bptt", type=int, default=32, help="characters per window")
    p.add_argument("--embed", type=int, default=32,
                   help="character embedding size")
    p.add_argument("--hidden", type=int, default=128,
                   help="LSTM hidden size")
    p.add_argument("--layers", type=int, default=1,
                   help="stacked LSTM layers")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="dropout on embeddings, between layers and before the head")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping")
    p.add_argument("--sample", type=int, default=200, help="characters to sample at the end")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="sampling temperature (lower: safer text)")
    args = check_args(p, p.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    train_ids, val_ids, vocab = char_corpus(args.text)
    train, val = streams(train_ids, args.batch_size), streams(val_ids, 4)
    model = CharLSTM(len(vocab), args.embed, args.hidden, args.layers, args.dropout)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    print(f"CharLSTM: {model.num_parameters():,} parameters, vocabulary {len(vocab)}, "
          f"{train.size} training characters in {args.batch_size} streams")

    def train_epoch(epoch):
        loss = run_streams(model, train, args.bptt, args, opt, args.clip)
        return {"loss": loss}

    def evaluate():
        model.eval()
        with lz.no_grad():
            loss = run_streams(model, val, args.bptt, args)
        return {"val_loss": loss, "val_ppl": math.exp(loss)}

    history = fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate)
    if history:
        write_summary(args, "char_lstm", "character language model",
                      args.text or "LeZero's shipped story", "val_ppl",
                      history[-1]["val_ppl"], sum(e["seconds"] for e in history),
                      parameters=model.num_parameters(), epochs=len(history))
    write_json(os.path.join(args.out, "vocab.json"), vocab)
    prime = train_ids[:8]
    out = model.generate(prime, args.sample, temperature=args.temperature)
    print("sample:", repr("".join(vocab[int(i)] for i in np.asarray(out))))


if __name__ == "__main__":
    main()
