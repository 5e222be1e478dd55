"""What the tensor, pipeline and 3D examples share: flags, the world, GPT-mini's config
and data, the step loop with a progress bar on rank 0, and the closing records.

Every rank runs the same script and draws the same global batch (from ``(seed, step)``);
each parallel wrapper takes its part of it.  Only rank 0 prints and writes the summary.
Run alone, each example trains in a one-process world.
"""
import os
import time

import numpy as np

from _common import (bar, char_corpus, check_args, epoch_progress, format_metrics,
                     init_world, make_parser, mean, show_metrics, smoke_limit, thread_limit,
                     write_history, write_summary)
from train_gpt import windows

import lezero as lz  # noqa: E402
from lezero import parallel  # noqa: E402


def parser(name, description, epochs=1, batch_size=16, lr=3e-3, steps=40):
    p = make_parser(name, description, epochs, batch_size, lr)
    p.add_argument("--steps", type=int, default=steps, help="optimizer steps per epoch")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds a collective may wait before a stall report")
    return p


def gpt_flags(p, layers=2, d_model=64):
    p.add_argument("--block-size", type=int, default=32, help="context length")
    p.add_argument("--layers", type=int, default=layers, help="Transformer blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--d-model", type=int, default=d_model, help="embedding width")
    return p


def setup(p):
    """Parse and check the flags, start the world, seed every rank alike."""
    args = check_args(p, p.parse_args())
    if args.steps < 1:
        p.error("--steps must be at least 1")
    world = init_world(timeout=args.timeout)     # or the mpi4py hint, no traceback
    parallel.model_parallel_manual_seed(args.seed)
    if world.rank == 0:
        os.makedirs(args.out, exist_ok=True)
    world.barrier()
    return args, world


def say(world, *parts):
    if world.rank == 0:
        print(*parts, flush=True)


def gpt_setup(args):
    """(GPTConfig, train ids, val ids, vocab) for LeZero's story, characters as tokens."""
    from lezero.nn.models.gpt import GPTConfig
    train_ids, val_ids, vocab = char_corpus()
    config = GPTConfig(vocab_size=len(vocab), block_size=args.block_size,
                       n_layer=args.layers, n_head=args.heads, d_model=args.d_model)
    return config, train_ids, val_ids, vocab


def global_batch(ids, args, epoch, step):
    """The same (x, y) windows on every rank: each parallel wrapper takes its share."""
    return windows(ids, args.block_size, args.batch_size,
                   np.random.default_rng([args.seed, epoch, step]))


def train_steps(args, world, epoch, step_fn):
    """``step_fn(x, y) -> loss`` for each step of the epoch; the mean loss."""
    losses = []
    steps = bar(smoke_limit(range(args.steps)), total=args.steps,
                desc=f"epoch {epoch + 1}", disable=world.rank != 0, leave=False)
    for step in steps:
        losses.append(step_fn(epoch, step))
    return mean(losses)


def run(args, world, train_epoch, describe):
    """Epochs of ``train_epoch(epoch) -> metrics``; prints and returns the history."""
    history, start = [], time.perf_counter()
    bar = epoch_progress(0, args.epochs, args.epochs, disable=world.rank != 0)
    with thread_limit(args.threads):
        for epoch in bar:
            t0 = time.perf_counter()
            metrics = dict(train_epoch(epoch))
            metrics["seconds"] = round(time.perf_counter() - t0, 3)
            history.append(metrics)
            show_metrics(bar, metrics)
    if history:
        say(world, f"after epoch {len(history)}/{args.epochs}: {format_metrics(history[-1])}")
    seconds = time.perf_counter() - start
    if world.rank == 0:
        write_history(args.out, history, plot=not args.smoke)
        write_summary(args, seconds=seconds, ranks=world.size, **describe(history))
    return history


def lm_eval(loss_fn, val_ids, args, world):
    """Mean validation loss over two fixed batches (the same on every rank)."""
    rng = np.random.default_rng([12345])
    with lz.no_grad():
        return mean([loss_fn(*windows(val_ids, args.block_size, args.batch_size, rng))
                     for _ in range(2)])
