"""Train GPT-mini, a character-level decoder-only Transformer, then sample from it.

Each step draws ``--batch-size`` random windows of ``--block-size`` characters (the
positions come from ``(seed, epoch, step)``, so a resumed run draws the same ones) and
predicts every next character; AdamW with weight decay on matrices only, linear warm-up
and cosine decay, gradient clipping.

    python examples/train_gpt.py                          # seconds, shipped story
    python examples/train_gpt.py --text input.txt --layers 6 --heads 6 --d-model 384 \\
        --block-size 256 --epochs 50 --steps 200 --dropout 0.2 --lr 1e-3
"""
import math
import os

import numpy as np

from lezero import optim
from lezero.nn.models import GPT

from _amp import Precision, add_memory_flags
from _common import (smoke_limit, char_corpus, check_args, fit, make_parser, mean, to_device,
                     write_json, write_summary)


def windows(ids, block, batch, rng):
    """``batch`` random (input, target) windows of length ``block``."""
    starts = rng.integers(0, len(ids) - block - 1, batch)
    x = np.stack([ids[s:s + block] for s in starts])
    y = np.stack([ids[s + 1:s + block + 1] for s in starts])
    return x, y


def param_groups(model, weight_decay):
    """Decay matrices (linear and embedding weights) but not biases or norm scales."""
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def main():
    p = make_parser("gpt", __doc__, epochs=6, batch_size=16, lr=3e-3)
    p.add_argument("--text", help="a UTF-8 text file (default: LeZero's shipped story)")
    p.add_argument("--steps", type=int, default=40, help="optimizer steps per epoch")
    p.add_argument("--block-size", type=int, default=64,
                   help="context length in characters")
    p.add_argument("--layers", type=int, default=2,
                   help="Transformer blocks")
    p.add_argument("--heads", type=int, default=4,
                   help="attention heads per block")
    p.add_argument("--d-model", type=int, default=128,
                   help="embedding width")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="dropout on embeddings, attention and residuals")
    p.add_argument("--weight-decay", type=float, default=0.1,
                   help="AdamW decay of the weight matrices")
    p.add_argument("--warmup", type=int, default=20, help="linear warm-up steps")
    p.add_argument("--untied", action="store_true", help="separate output head")
    p.add_argument("--sample", type=int, default=200, help="characters to sample at the end")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="sampling temperature (lower: safer text)")
    p.add_argument("--top-k", type=int, default=10,
                   help="sample among the k likeliest characters")
    add_memory_flags(p)
    args = check_args(p, p.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    train_ids, val_ids, vocab = char_corpus(args.text)
    model = GPT(vocab_size=len(vocab), block_size=args.block_size, n_layer=args.layers,
                n_head=args.heads, d_model=args.d_model, dropout=args.dropout,
                tie_weights=not args.untied)
    opt = optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr,
                      betas=(0.9, 0.95))
    total = args.epochs * args.steps

    def schedule(step):          # multiplier of --lr: warm-up, then cosine to 10%
        if step < args.warmup:
            return (step + 1) / args.warmup
        progress = (step - args.warmup) / max(1, total - args.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    sched = optim.lr_scheduler.LambdaLR(opt, schedule)
    mp = Precision(args, model)
    print(f"GPT-mini: {model.num_parameters():,} parameters, vocabulary {len(vocab)}, "
          f"{len(train_ids)} training characters")

    def train_epoch(epoch):
        rng = np.random.default_rng([args.seed, epoch])
        losses = []
        for _ in smoke_limit(range(args.steps)):
            x, y = to_device(args, *windows(train_ids, args.block_size, args.batch_size, rng))
            with mp.autocast():
                loss = model.loss(x, y)
            opt.zero_grad()
            mp.backward(loss)
            mp.step(opt, scheduler=sched, clip=1.0, parameters=model.parameters())
            losses.append(loss.item())
        return {"loss": mean(losses), "lr": sched.get_last_lr()[0]}

    def evaluate():
        rng = np.random.default_rng(12345)          # the same validation windows each time
        model.eval()
        with lz.no_grad():
            losses = [model.loss(*to_device(args, *windows(val_ids, args.block_size, 16, rng)))
                      .item() for _ in range(4)]
        return {"val_loss": mean(losses)}

    history = fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate,
                  {"scheduler": sched, **mp.state()})
    if history:
        write_summary(args, "gpt_mini", "character language model",
                      args.text or "LeZero's shipped story",
                      "val_loss (nats/char)", history[-1]["val_loss"],
                      sum(e["seconds"] for e in history), parameters=model.num_parameters(),
                      epochs=len(history))
    write_json(os.path.join(args.out, "vocab.json"), vocab)
    out = model.generate(train_ids[None, :8], args.sample, args.temperature, args.top_k)
    print("sample:", repr("".join(vocab[int(i)] for i in out[0])))


if __name__ == "__main__":
    main()
