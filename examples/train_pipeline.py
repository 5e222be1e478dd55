"""Pipeline-parallel training of an MLP on the 8x8 digits: the model is cut into one stage
per rank (or ``--chunks`` per rank, interleaved), each batch into ``--micro-batches``.

The schedule is data: the script prints it as a timeline before training (what will run),
then the timeline measured in the last step (what did run) with its bubble beside the
theory (p - 1) / (m + p - 1), and writes both pictures.

    mpiexec -n 2 python examples/train_pipeline.py
    mpiexec -n 4 python examples/train_pipeline.py --schedule gpipe --micro-batches 8
    mpiexec -n 2 python examples/train_pipeline.py --schedule interleaved --chunks 2
    python examples/train_pipeline.py --smoke        # one process, a few steps
"""
import os

import numpy as np

from _common import batches, digits
from _parallel3d import parser, run, say, setup

import lezero.functions as F  # noqa: E402
from lezero import nn, optim, parallel  # noqa: E402


def model(width):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width),
                         nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


def accuracy(pipe, world, x, t):
    """Test accuracy: inference through the pipeline, counted on the last stage's rank."""
    out = pipe(x)
    right = 0 if out is None else int((out.data.argmax(axis=1) == t).sum())
    return world.allreduce(right, "max") / len(t)


def main():
    p = parser("pipeline", __doc__, epochs=3, batch_size=64, lr=0.1, steps=0)
    p.add_argument("--schedule", choices=("gpipe", "1f1b", "interleaved"), default="1f1b")
    p.add_argument("--micro-batches", type=int, default=4, help="micro-batches per step")
    p.add_argument("--chunks", type=int, default=1, help="model chunks per rank (interleaved)")
    p.add_argument("--width", type=int, default=128, help="hidden width")
    p.set_defaults(steps=1)
    args, world = setup(p)
    if args.batch_size % args.micro_batches:
        p.error(f"--batch-size {args.batch_size} must divide into --micro-batches "
                f"{args.micro_batches}")
    x_train, t_train = digits(True)
    x_test, t_test = digits(False)
    test_n = len(t_test) - len(t_test) % args.micro_batches
    pipe = parallel.Pipeline(model(args.width), world, args.micro_batches, args.schedule,
                             chunks=args.chunks, loss_fn=F.cross_entropy)
    opt = optim.SGD(pipe.parameters(), lr=args.lr, momentum=0.9)
    say(world, f"MLP in {pipe.n_stages} stages on {world.size} rank(s), schedule "
               f"{pipe.schedule.name}:\n{pipe.schedule.text()}")

    def train_epoch(epoch):
        losses = [pipe_step(xb, tb) for xb, tb in
                  batches((x_train, t_train), args.batch_size, args.seed, epoch,
                          drop_last=True)]
        return {"loss": float(np.mean(losses)),
                "test_acc": accuracy(pipe, world, x_test[:test_n], t_test[:test_n])}

    def pipe_step(xb, tb):
        opt.zero_grad()
        loss = pipe.step(xb, tb)
        opt.step()
        return loss

    history = run(args, world, train_epoch, lambda h: dict(
        model=f"pipeline_mlp_{args.schedule}", task="digit classification",
        data="8x8 digits", metric="test_acc", value=h[-1]["test_acc"],
        micro_batches=args.micro_batches, chunks=args.chunks))
    measured = pipe.measured_timeline()
    if world.rank == 0:
        quantum = measured.makespan / 60
        print("the last step as it ran:\n"
              + parallel.timeline_text(measured, quantum=quantum))
        parallel.plot_timeline(pipe.schedule.simulate(), os.path.join(args.out, "schedule.png"))
        parallel.plot_timeline(measured, os.path.join(args.out, "measured.png"))
        print(f"test accuracy {history[-1]['test_acc']:.3f}; wrote schedule.png and "
              f"measured.png to {args.out}")


if __name__ == "__main__":
    main()
