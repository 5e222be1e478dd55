"""What the data-parallel examples share: the world, rank-0 output, the epoch loop with
checkpoints written by rank 0 (``parallel.save_checkpoint``), and the closing records.

Every rank runs the same script; only rank 0 prints, shows a progress bar and writes
files.  Run alone (``python examples/train_ddp_cnn.py``) they train in a one-process world.
"""
import os
import time

import lezero as lz
from lezero import parallel

from _common import (check_args, epoch_progress, format_metrics, init_world, make_parser,
                     show_metrics, thread_limit, write_history, write_summary)


def ddp_parser(name, description, epochs, batch_size, lr):
    p = make_parser(name, description, epochs, batch_size, lr)
    p.add_argument("--bucket-mb", type=float, default=25.0,
                   help="gradient bucket size in MiB (inf: one all-reduce after backward)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds a collective may wait before a stall report")
    return p


def setup(parser):
    """Parse and check the flags, start the world, seed every rank alike."""
    args = check_args(parser, parser.parse_args())
    if args.bucket_mb <= 0:
        parser.error("--bucket-mb must be positive")
    world = init_world(timeout=args.timeout)     # or the mpi4py hint, no traceback
    if args.batch_size % world.size:
        parser.error(f"--batch-size {args.batch_size} (the global batch) must divide by the "
                     f"{world.size} ranks")
    lz.manual_seed(args.seed)
    if world.rank == 0:
        os.makedirs(args.out, exist_ok=True)
    world.barrier()                       # the folder exists before anyone writes into it
    return args, world


def say(world, *parts):
    if world.rank == 0:
        print(*parts, flush=True)


def run_epochs(args, world, dp, opt, sched, train_epoch, evaluate):
    """Epochs [start, args.epochs) with a checkpoint after each; returns the history."""
    start, history = 0, []
    if args.resume:
        state = parallel.load_checkpoint(args.resume, world)     # identical on every rank
        dp.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start, history = int(state["epoch"]), list(state["history"])
        say(world, f"resumed from {args.resume} after epoch {start}")
    stop = args.epochs if args.stop_after is None else min(args.epochs, start + args.stop_after)
    ckpt = os.path.join(args.out, "checkpoint.npz")
    bar = epoch_progress(start, stop, args.epochs, disable=world.rank != 0)
    with thread_limit(args.threads):
        for epoch in bar:
            t0 = time.perf_counter()
            dp.train()
            metrics = dict(train_epoch(epoch))
            metrics.update(evaluate())
            metrics["seconds"] = round(time.perf_counter() - t0, 3)
            history.append(metrics)
            parallel.save_checkpoint(ckpt, {"model": dp.module.state_dict(),
                                            "optimizer": opt.state_dict(),
                                            "scheduler": sched.state_dict(),
                                            "epoch": epoch + 1, "history": history},
                                     world, rng=True)
            show_metrics(bar, metrics)
    if history:
        say(world, f"after epoch {len(history)}/{args.epochs}: {format_metrics(history[-1])}")
    return history


def finish(args, world, dp, history, **summary):
    """Write the timeline (all ranks' events, one file), the weights, the history and the
    summary; print the timeline's table."""
    dp.timeline().to_chrome_trace(os.path.join(args.out, "timeline.json"), comm=world)
    if world.rank != 0:
        return
    dp.module.save(os.path.join(args.out, "model.npz"))
    written = write_history(args.out, history, plot=not args.smoke)
    write_summary(args, ranks=world.size, **summary)
    print(dp.timeline().summary())
    print(f"wrote the weights, {', '.join(written)}, summary.json and timeline.json (open "
          f"it in chrome://tracing or ui.perfetto.dev) to {args.out}")
