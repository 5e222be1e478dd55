"""What every training script in ``examples/`` shares: flags, data, batches, checkpoints.

Each script builds its model and writes one ``train_epoch(epoch) -> metrics`` function;
``fit`` runs the epochs and takes care of the rest:

* ``--resume CHECKPOINT`` restores the models, optimizers, schedulers, the epoch, the
  metric history and LeZero's random generator, so a resumed run continues exactly as an
  uninterrupted one would (batch orders come from ``(seed, epoch)``, not from state);
* after every epoch ``OUT/checkpoint.npz`` is written atomically (a crash never leaves a
  half-written file), and at the end ``OUT/model.npz`` holds the weights alone;
* ``OUT/history.json`` records the metrics per epoch; on a terminal a progress bar shows
  them, in a log file or a pipe a plain line per epoch does (``bar``, ``epoch_progress``).

``check_args`` sends a --smoke run to ``runs/NAME-smoke`` (never over a real run) and
removes an output folder the run created but left empty; ``require`` stops a script
before any work, with a one-line install hint, when an optional package is missing.
"""
import argparse
import atexit
import contextlib
import importlib
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))      # run from a checkout without installing

import lezero as lz  # noqa: E402
from lezero import cuda  # noqa: E402
from lezero.data.progress import EpochProgress, format_metrics, on_terminal  # noqa: E402,F401
from lezero.random import get_rng_state, set_rng_state  # noqa: E402
from lezero.utils.files import atomic_write  # noqa: E402


# ----- flags ------------------------------------------------------------------------------

SMOKE_BATCHES = 3          # batches per epoch under --smoke
_smoke = False             # set by check_args when --smoke is given

class _HelpFormatter(argparse.RawDescriptionHelpFormatter,
                     argparse.ArgumentDefaultsHelpFormatter):
    """Keep the docstring's layout (its command lines) and show every default."""


def make_parser(name, description, epochs, batch_size, lr):
    """The flags every example takes, with the example's own small defaults."""
    p = argparse.ArgumentParser(prog=f"python examples/train_{name}.py",
                                description=description, formatter_class=_HelpFormatter)
    p.add_argument("--epochs", type=int, default=epochs, help="total epochs to train")
    p.add_argument("--batch-size", type=int, default=batch_size, help="samples per step")
    p.add_argument("--lr", type=float, default=lr, help="initial learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed for weights, batches, dropout")
    p.add_argument("--out", default=os.path.join("runs", name),
                   help="directory for checkpoint.npz, model.npz and history.json")
    p.add_argument("--resume", metavar="CHECKPOINT",
                   help="continue from a checkpoint.npz written by this script (keep the "
                        "other flags as they were: the schedule was planned for --epochs)")
    p.add_argument("--stop-after", type=int, default=None, metavar="N",
                   help="run at most N epochs in this invocation (resume later)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="gpu needs CuPy and a CUDA device")
    p.add_argument("--smoke", action="store_true",
                   help=f"a smoke run for the test suite: one epoch of at most "
                        f"{SMOKE_BATCHES} batches (checks that the script works, trains "
                        "nothing useful)")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS and Numba threads; 0 leaves the libraries' defaults (small "
                        "models gain nothing from more threads, and lose much on a busy "
                        "machine)")
    return p


def check_args(parser, args):
    """Reject nonsense early, with the flag's name.  A --smoke run writes into
    ``runs/NAME-smoke`` unless --out is given, never over a real run's ``runs/NAME``."""
    for flag in ("epochs", "batch_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.lr <= 0:
        parser.error("--lr must be positive")
    if args.device == "gpu" and not cuda.is_available():
        parser.error("--device gpu: CuPy with a CUDA device is not available")
    if getattr(args, "smoke", False):
        global _smoke
        _smoke = True
        args.epochs, args.stop_after = 1, None
        if args.out == parser.get_default("out"):
            args.out += "-smoke"
    remove_if_left_empty(args.out)
    return args


# ----- optional packages and the output folder ---------------------------------------------

# The optional packages the examples import, and the extra of setup.py that installs each
# (``make install`` installs them all).
EXTRAS = {"onnx": "onnx", "onnxruntime": "onnx", "starlette": "serve", "uvicorn": "serve",
          "tritonclient": "serve", "gymnasium": "examples", "networkx": "examples",
          "mpi4py": "mpi"}


def require(*modules):
    """Exit with a one-line install hint unless every module imports.  Scripts call it
    before any work, so a missing package costs no training run."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        extras = sorted({EXTRAS[m.split(".")[0]] for m in missing})
        raise SystemExit(f"{os.path.basename(sys.argv[0])} needs {', '.join(missing)}: "
                         f"pip install -e \".[{','.join(extras)}]\" in the checkout (or "
                         "make install, which installs every extra the examples use)")


def init_world(**kwargs):
    """``parallel.init(**kwargs)``.  Under mpiexec without mpi4py it exits with the
    one-line install hint instead of a traceback (alone, the world of one needs no MPI)."""
    from lezero import parallel
    try:
        return parallel.init(**kwargs)
    except ImportError as e:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: {e}") from None


_watched = set()


def remove_if_left_empty(out):
    """Remove ``out`` (and the folders above it this run creates) at exit when nothing
    was written into it: a run that fails early leaves no empty ``runs/NAME/``."""
    out = os.path.abspath(out)
    rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
    if out in _watched or rank != "0":       # under mpiexec rank 0 alone writes
        return
    _watched.add(out)
    created = []
    path = out
    while not os.path.exists(path) and path != os.path.dirname(path):
        created.append(path)
        path = os.path.dirname(path)

    def clean():
        for folder in created:                # deepest first
            if os.path.isdir(folder) and os.listdir(folder):
                return
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    atexit.register(clean)


def smoke_limit(iterable):
    """``iterable`` cut to ``SMOKE_BATCHES`` items under --smoke (unchanged otherwise);
    scripts with loops of their own wrap them in it."""
    if not _smoke:
        yield from iterable
        return
    for i, item in enumerate(iterable):
        if i == SMOKE_BATCHES:
            return
        yield item


@contextlib.contextmanager
def thread_limit(n):
    """At most ``n`` BLAS and Numba threads inside the block (no-op for 0)."""
    if not n:
        yield
        return
    from threadpoolctl import threadpool_limits
    import numba
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    with threadpool_limits(limits=n):
        try:
            yield
        finally:
            numba.set_num_threads(previous)


# ----- data ------------------------------------------------------------------------------

def digits(train=True, size=8, channels=1):
    """scikit-learn's 8x8 digits as float32 (N, channels, size, size) in [0, 1] and int64
    labels; ``size`` a multiple of 8 repeats pixels (nearest-neighbour upscaling)."""
    from lezero.data.datasets import Digits
    ds = Digits(train=train)
    x = ds.data[:, None]
    if size != 8:
        if size % 8:
            raise ValueError(f"digits: size must be a multiple of 8, got {size}")
        x = x.repeat(size // 8, axis=2).repeat(size // 8, axis=3)
    return np.ascontiguousarray(np.repeat(x, channels, axis=1)), ds.targets


def cifar10(train=True, download=False):
    """CIFAR-10 as float32 (N, 3, 32, 32) in [0, 1] and int64 labels."""
    from lezero.data.datasets import CIFAR10
    ds = CIFAR10(train=train, download=download)
    x = np.asarray(ds.data, dtype=np.float32).transpose(0, 3, 1, 2) / 255.0
    return np.ascontiguousarray(x), np.asarray(ds.targets, dtype=np.int64)


def batches(arrays, batch_size, seed, epoch, shuffle=True, drop_last=False):
    """Yield tuples of aligned batches.  The order depends only on ``(seed, epoch)``, so
    a resumed run sees exactly the batches the uninterrupted run would have seen."""
    n = len(arrays[0])
    order = (np.random.default_rng([seed, epoch]).permutation(n) if shuffle
             else np.arange(n))
    stop = n - n % batch_size if drop_last else n
    for i in smoke_limit(range(0, stop, batch_size)):
        idx = order[i:i + batch_size]
        yield tuple(a[idx] for a in arrays)


def to_device(args, *arrays):
    """The arrays on the chosen device (CuPy for --device gpu)."""
    out = tuple(cuda.as_cupy(a) if args.device == "gpu" else a for a in arrays)
    return out if len(out) > 1 else out[0]


def accuracy(model, x, t, args, batch_size=256):
    """Classification accuracy in eval mode, without a graph."""
    was_training = model.training
    model.eval()
    correct = seen = 0
    with lz.no_grad():
        for (xb, tb) in batches((x, t), batch_size, 0, 0, shuffle=False):
            logits = model(to_device(args, xb)).data
            correct += int((cuda.as_numpy(logits).argmax(axis=1) == tb).sum())
            seen += len(tb)                # --smoke sees a few batches only
    model.train(was_training)
    return correct / max(seen, 1)


# ----- checkpoints and the epoch loop --------------------------------------------------

def save_checkpoint(path, modules, optimizers, schedulers, epoch, history):
    """Everything that decides the rest of the run, in one atomically written file."""
    lz.save({"modules": {k: m.state_dict() for k, m in modules.items()},
             "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
             "schedulers": {k: s.state_dict() for k, s in schedulers.items()},
             "epoch": epoch, "history": history, "rng": get_rng_state()}, path)


def load_checkpoint(path, modules, optimizers, schedulers):
    """Restore a checkpoint in place; returns ``(epochs_done, history)``."""
    ck = lz.load(path)
    for group, objects in (("modules", modules), ("optimizers", optimizers),
                           ("schedulers", schedulers)):
        missing = set(objects) - set(ck[group])
        if missing:
            raise SystemExit(f"--resume {path}: the checkpoint has no {group} "
                             f"{sorted(missing)}; was it written by this script?")
        for key, obj in objects.items():
            obj.load_state_dict(ck[group][key])
    set_rng_state(ck["rng"])
    return int(ck["epoch"]), list(ck["history"])


def fit(args, modules, optimizers, train_epoch, evaluate=None, schedulers=None):
    """Run epochs ``[start, args.epochs)``, checkpointing after each; returns the history
    (one dict of metrics per epoch).  ``modules``/``optimizers``/``schedulers`` are dicts
    name -> object (a GAN has two of each)."""
    schedulers = schedulers or {}
    lz.utils.keep_freed_memory()         # reuse freed arrays across steps (fewer page faults)
    os.makedirs(args.out, exist_ok=True)
    if args.device == "gpu":
        for m in modules.values():
            m.to_gpu()
    start, history = 0, []
    if args.resume:
        start, history = load_checkpoint(args.resume, modules, optimizers, schedulers)
        print(f"resumed from {args.resume} after epoch {start}")
    ckpt = os.path.join(args.out, "checkpoint.npz")
    stop = args.epochs if args.stop_after is None else min(args.epochs,
                                                             start + args.stop_after)
    bar = epoch_progress(start, stop, args.epochs)
    with thread_limit(args.threads):
        for epoch in bar:
            t0 = time.perf_counter()
            for m in modules.values():
                m.train()
            metrics = dict(train_epoch(epoch))
            if evaluate is not None:
                metrics.update(evaluate())
            metrics["seconds"] = round(time.perf_counter() - t0, 3)
            history.append(metrics)
            save_checkpoint(ckpt, modules, optimizers, schedulers, epoch + 1, history)
            show_metrics(bar, metrics)
    if history:
        print(f"after epoch {len(history)}/{args.epochs}: {format_metrics(history[-1])}")
    for key, m in modules.items():
        name = "model.npz" if len(modules) == 1 else f"{key}.npz"
        m.save(os.path.join(args.out, name))
    written = write_history(args.out, history, plot=not args.smoke)
    print(f"wrote {ckpt}, the weights, {' and '.join(written)} to {args.out}")
    return history


def bar(iterable=None, disable=False, **kwargs):
    """A tqdm bar on stderr, drawn only on a terminal and never under --smoke (a test
    reads that output); otherwise a silent tqdm with the same methods."""
    from tqdm import tqdm
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, disable=disable or _smoke or not on_terminal(), **kwargs)


def epoch_progress(start, stop, total, disable=False):
    """The run's progress over epochs ``[start, stop)`` of ``total``: ``lezero.demo``'s
    ``EpochProgress`` (a bar on a terminal, a plain line per epoch in a log), never a bar
    under --smoke; ``show_metrics`` reports each epoch's metrics through it."""
    return EpochProgress(start, stop, total, quiet=disable, draw=not _smoke and on_terminal())


def show_metrics(epochs, metrics):
    """Report one epoch's metrics: beside the epoch bar, or as a line of their own."""
    epochs.show(metrics)


def write_history(out, history, plot=True):
    """``OUT/history.json`` and, when there is something to draw, ``OUT/history.png``
    (``lezero.utils.plot_history``), both written atomically.  ``plot=False`` (smoke
    runs) skips the PNG: importing matplotlib costs a smoke run a second or two.  Returns
    the names of the files written."""
    write_json(os.path.join(out, "history.json"), history)
    if history and plot:
        lz.utils.plot_history(history, os.path.join(out, "history.png"))
        return ["history.json", "history.png"]
    return ["history.json"]


def mean(values):
    return float(np.mean(values)) if len(values) else float("nan")


def save_image_grid(images, path, title=None, cols=8):
    """Save (N, 1 or 3, H, W) images in [0, 1] as a PNG grid (atomic write)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    images = np.clip(cuda.as_numpy(images), 0, 1)
    rows = int(np.ceil(len(images) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.9, rows * 0.9 + 0.4))
    for ax, img in zip(np.ravel(axes), list(images) + [None] * (rows * cols - len(images))):
        ax.axis("off")
        if img is not None:
            ax.imshow(img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0),
                      cmap="gray", vmin=0, vmax=1)
    if title:
        fig.suptitle(title, fontsize=9)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=80))
    plt.close(fig)


def char_corpus(path=None, val_fraction=0.1):
    """A text as character ids: ``(train_ids, val_ids, vocab)``; LeZero's shipped story
    unless ``path`` names a UTF-8 text file.  The last ``val_fraction`` is held out."""
    from lezero.data.datasets import load_corpus
    if path:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    else:
        text = load_corpus()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    cut = int(len(ids) * (1 - val_fraction))
    return ids[:cut], ids[cut:], vocab


def write_json(path, obj):
    """Write ``obj`` as JSON atomically."""
    text = json.dumps(obj, indent=1)
    atomic_write(path, text)


def write_summary(args, model, task, data, metric, value, seconds, **extra):
    """Record what a run achieved in ``OUT/summary.json``: the zoo table
    (``make zoo-table``, docs/model_zoo.md) is generated from these files, never typed.

    ``metric``/``value``: the headline result (``"test_acc"``, 0.981; ``"mAP@0.5"``, ...);
    ``seconds``: the training time; ``extra``: anything else worth a column."""
    import datetime
    import platform
    summary = {"model": model, "task": task, "data": data, "metric": metric,
               "value": float(value), "seconds": round(float(seconds), 2),
               "smoke": bool(getattr(args, "smoke", False)),
               "command": "python " + " ".join(sys.argv),
               "date": datetime.date.today().isoformat(), "machine": platform.machine(),
               **extra}
    write_json(os.path.join(args.out, "summary.json"), summary)
    return summary
