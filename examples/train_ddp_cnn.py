"""Data-parallel training of an MNIST-style CNN on the handwritten digits.

Each rank trains on its own shard (``DistributedSampler``) with ``--batch-size / ranks``
images per step; ``DataParallel`` averages the gradients while backward runs and
``SyncBatchNorm`` normalises over the whole global batch, so N ranks train exactly like
one process with the global batch.  Rank 0 prints, checkpoints and writes the timeline.

    mpiexec -n 2 python examples/train_ddp_cnn.py            # two ranks
    python examples/train_ddp_cnn.py                         # the same, one process
    mpiexec -n 2 python examples/train_ddp_cnn.py --bucket-mb inf   # one all-reduce/step
"""
import time

import numpy as np

from _common import bar, digits, mean, smoke_limit   # first: it puts this checkout on the path
from _ddp import ddp_parser, finish, run_epochs, say, setup

import lezero as lz  # noqa: E402
import lezero.functions as F  # noqa: E402
from lezero import nn, optim, parallel  # noqa: E402
from lezero.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402


def build_cnn(channels=16):
    """conv-BN-ReLU-pool twice, then a linear classifier (8x8 input)."""
    return nn.Sequential(
        nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.BatchNorm2d(2 * channels),
        nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * channels * 2 * 2, 10))


def shard_accuracy(model, x, t, world):
    """Accuracy over the whole test set: each rank scores its shard, counts are summed."""
    model.eval()
    idx = np.arange(world.rank, len(x), world.size)
    with lz.no_grad():
        pred = model(x[idx]).data.argmax(axis=1)
    model.train()
    correct, total = world.allreduce(np.array([(pred == t[idx]).sum(), len(idx)]))
    return float(correct / total)


def main():
    p = ddp_parser("ddp_cnn", __doc__, epochs=4, batch_size=64, lr=0.05)
    p.add_argument("--channels", type=int, default=16, help="channels of the first conv")
    p.add_argument("--no-sync-bn", action="store_true",
                   help="keep per-rank BatchNorm statistics (not one-process equivalent)")
    args, world = setup(p)
    (x, t), (x_test, t_test) = digits(True), digits(False)
    model = build_cnn(args.channels)
    if not args.no_sync_bn:
        model = parallel.convert_sync_batchnorm(model)
    dp = parallel.DataParallel(model, bucket_mb=args.bucket_mb)
    opt = optim.SGD(dp.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                    weight_decay=5e-4)
    sampler = DistributedSampler(range(len(x)), shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(TensorDataset(x, t), batch_size=args.batch_size // world.size,
                        sampler=sampler, drop_last=True)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
    say(world, f"data parallel on {world.size} rank{'s' * (world.size != 1)} ({world.backend}): "
               f"{model.num_parameters():,} parameters in {len(dp.buckets)} buckets, "
               f"{len(loader)} steps/epoch of {args.batch_size} images "
               f"({args.batch_size // world.size} per rank)")

    def train_epoch(epoch):
        sampler.set_epoch(epoch)          # a new order each epoch, the same on every rank
        losses = []
        batches = bar(smoke_limit(loader), total=len(loader), desc=f"epoch {epoch + 1}",
                      disable=world.rank != 0, leave=False)
        for xb, tb in batches:
            loss = F.cross_entropy(dp(xb), tb)
            opt.zero_grad()
            loss.backward()               # returns with gradients averaged over the ranks
            opt.step()
            sched.step()
            losses.append(world.allreduce(loss.item(), "mean"))
        return {"loss": mean(losses), "overlap": round(dp.timeline().overlap_fraction(), 3)}

    start = time.perf_counter()
    history = run_epochs(args, world, dp, opt, sched, train_epoch,
                         lambda: {"test_acc": shard_accuracy(dp.module, x_test, t_test, world)})
    accuracy = history[-1]["test_acc"] if history else float("nan")
    say(world, f"test accuracy {accuracy:.4f} after {len(history)} epochs on {world.size} rank"
               f"{'s' * (world.size != 1)}")
    finish(args, world, dp, history, model="ddp_cnn", task="image classification",
           data="digits 8x8", metric="test_acc", value=accuracy,
           seconds=time.perf_counter() - start)


if __name__ == "__main__":
    main()
