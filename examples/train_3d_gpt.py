"""GPT-mini with data, tensor and pipeline parallelism at once, on a ``Grid(dp, tp, pp)``.

The world's ranks form a grid (tensor index fastest): each tensor group splits every
layer (Megatron), each pipeline runs its stages with the 1F1B schedule over
``--micro-batches``, and the data-parallel replicas average their gradients.  The loss
printed is the mean over the global batch, the curve one process would follow.

    mpiexec -n 4 python examples/train_3d_gpt.py --dp 1 --tp 2 --pp 2
    mpiexec -n 8 python examples/train_3d_gpt.py --dp 2 --tp 2 --pp 2
    mpiexec -n 2 python examples/train_3d_gpt.py              # defaults: pp 2 on 2 ranks
    python examples/train_3d_gpt.py --smoke                   # one process, a few steps
"""
import os

from _parallel3d import (global_batch, gpt_flags, gpt_setup, parser, run, say, setup,
                         train_steps)

from lezero import optim, parallel  # noqa: E402


def grid_shape(p, args, size):
    """(dp, tp, pp): the flags, with pp filling what dp x tp leave."""
    dp, tp = args.dp, args.tp
    if size % (dp * tp):
        p.error(f"--dp {dp} x --tp {tp} does not divide the {size} ranks")
    pp = args.pp or size // (dp * tp)
    if dp * tp * pp != size:
        p.error(f"--dp {dp} x --tp {tp} x --pp {pp} = {dp * tp * pp}, the world has {size}")
    return dp, tp, pp


def main():
    p = gpt_flags(parser("3d_gpt", __doc__, epochs=2, batch_size=16, lr=3e-3, steps=30),
                  layers=4)
    p.add_argument("--dp", type=int, default=1, help="data-parallel replicas")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks per layer")
    p.add_argument("--pp", type=int, default=0, help="pipeline stages (0: the ranks left)")
    p.add_argument("--micro-batches", type=int, default=4, help="micro-batches per step")
    p.add_argument("--schedule", choices=("gpipe", "1f1b", "interleaved"), default="1f1b")
    args, world = setup(p)
    dp, tp, pp = grid_shape(p, args, world.size)
    if args.batch_size % (dp * args.micro_batches):
        p.error(f"--batch-size {args.batch_size} must divide into dp x --micro-batches = "
                f"{dp * args.micro_batches} equal parts")
    grid = parallel.Grid(dp, tp, pp)
    say(world, grid.layout())
    config, train_ids, val_ids, vocab = gpt_setup(args)
    gpt = parallel.GridGPT(config, grid, micro_batches=args.micro_batches,
                           schedule=args.schedule)
    opt = optim.AdamW(gpt.parameters(), lr=args.lr, weight_decay=0.0)
    say(world, f"GPT-mini, {config.n_layer} blocks in {pp} stage(s); rank 0 holds "
               f"{sum(q.size for q in gpt.parameters()):,} parameters")

    def step(epoch, i):
        x, y = global_batch(train_ids, args, epoch, i)
        opt.zero_grad()
        loss = gpt.step(x, y)
        opt.step()
        return loss

    def train_epoch(epoch):
        return {"loss": train_steps(args, world, epoch, step)}

    history = run(args, world, train_epoch, lambda h: dict(
        model="3d_gpt", task="character language model", data="LeZero story",
        metric="loss", value=h[-1]["loss"], grid=[dp, tp, pp]))
    parallel.save_sharded_checkpoint(os.path.join(args.out, "sharded"), gpt.pipe,
                                     extra={"history": history}, grid=grid)
    measured = gpt.pipe.measured_timeline()
    if world.rank == 0:
        print(f"final loss {history[-1]['loss']:.4f} on Grid(dp={dp}, tp={tp}, pp={pp}); "
              f"the last step's pipeline bubble {measured.bubble:.0%} (theory "
              f"{parallel.bubble_theory(args.schedule, pp, args.micro_batches):.0%}); "
              f"sharded checkpoint in {os.path.join(args.out, 'sharded')}")


if __name__ == "__main__":
    main()
