"""Data-parallel training of GPT-mini, a character-level Transformer, on LeZero's story.

Every step each rank draws its own ``--batch-size / ranks`` random windows (from
``(seed, epoch, step, rank)``, so a resumed run draws the same ones); ``DataParallel``
averages the gradients bucket by bucket while backward runs; gradient clipping and AdamW
then see the same averaged gradients on every rank, so the replicas stay identical.

    mpiexec -n 2 python examples/train_ddp_gpt.py
    python examples/train_ddp_gpt.py --smoke                 # one process, a few steps
    mpiexec -n 2 python examples/train_ddp_gpt.py --layers 4 --d-model 192 --bucket-mb 1
"""
import time

import numpy as np

from _common import bar, char_corpus, mean, smoke_limit   # first: puts this checkout on the path
from _ddp import ddp_parser, finish, run_epochs, say, setup
from train_gpt import windows

import lezero as lz  # noqa: E402
from lezero import optim, parallel  # noqa: E402
from lezero.nn.models import GPT  # noqa: E402


def main():
    p = ddp_parser("ddp_gpt", __doc__, epochs=4, batch_size=16, lr=3e-3)
    p.add_argument("--steps", type=int, default=40, help="optimizer steps per epoch")
    p.add_argument("--block-size", type=int, default=64, help="context length")
    p.add_argument("--layers", type=int, default=2, help="Transformer blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--d-model", type=int, default=128, help="embedding width")
    p.add_argument("--warmup", type=int, default=20, help="linear warm-up steps")
    p.add_argument("--sample", type=int, default=120, help="characters to sample at the end")
    args, world = setup(p)
    train_ids, val_ids, vocab = char_corpus()
    model = GPT(vocab_size=len(vocab), block_size=args.block_size, n_layer=args.layers,
                n_head=args.heads, d_model=args.d_model)
    dp = parallel.DataParallel(model, bucket_mb=args.bucket_mb)
    decay = [q for q in dp.parameters() if q.ndim >= 2]
    rest = [q for q in dp.parameters() if q.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": 0.1},
                       {"params": rest, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, min(args.warmup, args.epochs * args.steps - 1))
    sched = optim.lr_scheduler.SequentialLR(opt, [     # linear warm-up, cosine to 10%
        optim.lr_scheduler.LinearLR(opt, 1.0 / warmup, 1.0, warmup),
        optim.lr_scheduler.CosineAnnealingLR(opt, max(1, args.epochs * args.steps - warmup),
                                             eta_min=0.1 * args.lr)], [warmup])
    local_batch = args.batch_size // world.size
    say(world, f"GPT-mini data parallel on {world.size} rank{'s' * (world.size != 1)} "
               f"({world.backend}): {model.num_parameters():,} parameters in "
               f"{len(dp.buckets)} buckets, {args.batch_size} windows/step "
               f"({local_batch} per rank)")

    def train_epoch(epoch):
        losses = []
        steps = bar(smoke_limit(range(args.steps)), total=args.steps,
                    desc=f"epoch {epoch + 1}", disable=world.rank != 0, leave=False)
        for step in steps:
            rng = np.random.default_rng([args.seed, epoch, step, world.rank])
            x, y = windows(train_ids, args.block_size, local_batch, rng)
            logits = dp(x)
            loss = lz.functions.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm_(dp.parameters(), 1.0)   # on averaged gradients: same everywhere
            opt.step()
            sched.step()
            losses.append(world.allreduce(loss.item(), "mean"))
        return {"loss": mean(losses), "lr": sched.get_last_lr()[0],
                "overlap": round(dp.timeline().overlap_fraction(), 3)}

    def evaluate():
        rng = np.random.default_rng([12345, world.rank])
        dp.eval()
        with lz.no_grad():
            mine = mean([dp.module.loss(*windows(val_ids, args.block_size, 8, rng)).item()
                         for _ in range(2)])
        dp.train()
        return {"val_loss": world.allreduce(mine, "mean")}

    start = time.perf_counter()
    history = run_epochs(args, world, dp, opt, sched, train_epoch, evaluate)
    val = history[-1]["val_loss"] if history else float("nan")
    finish(args, world, dp, history, model="ddp_gpt", task="character language model",
           data="LeZero story", metric="val_loss", value=val,
           seconds=time.perf_counter() - start)
    if world.rank == 0:
        out = dp.module.generate(train_ids[None, :8], args.sample, 0.8, 10)
        print("sample:", repr("".join(vocab[int(i)] for i in out[0])))


if __name__ == "__main__":
    main()
