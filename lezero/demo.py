"""``make demo``: train LeNet-5 on real handwritten digits, save it, reload it, report.

The data are scikit-learn's digits: 1,797 real 8x8 scans shipped inside the package (no
download), split 80/20 with a fixed seed (1,438 training and 359 test images).  The run
trains a LeNet-5 with Adam and a cosine learning-rate schedule, shows a progress bar,
saves the trained model, loads the file into a fresh model, checks that the reloaded
model scores the same, draws the training curves into a PNG and prints a short report.
On a terminal a bar shows the epochs; in a log file or a pipe a plain line per epoch does.

    python -m lezero.demo [--epochs 20] [--batch-size 64] [--lr 1e-2] [--out runs/demo]
    python -m lezero.demo --record     # in a checkout: the report becomes the README's block
"""
import argparse
import os
import sys
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim, runtime
from lezero.data import DataLoader, TensorDataset
from lezero.data.datasets import Digits
from lezero.data.progress import EpochProgress
from lezero.nn.models import LeNet5

TARGET_ACCURACY = 0.97
MODEL_FILE = "lenet5_digits.npz"
CURVE_FILE = "training_curves.png"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m lezero.demo",
                                description="Train LeNet-5 on scikit-learn's handwritten "
                                            "digits, save, reload and report.")
    p.add_argument("--epochs", type=int, default=20, help="passes over the training set")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2, help="Adam's initial learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join("runs", "demo"),
                   help="directory for the model file and the curve plot")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS and Numba threads (default 1: the matrices are small)")
    p.add_argument("--record", action="store_true",
                   help="save the report as docs/figures/demo.md and copy it into the "
                        "README's block (tools/doc_figures.py; a checkout only)")
    p.add_argument("--no-progress", action="store_true",
                   help="show no progress (neither the bar nor the per-epoch lines)")
    args = p.parse_args(argv)
    if min(args.epochs, args.batch_size, args.threads) < 1 or args.lr <= 0:
        p.error("--epochs, --batch-size and --threads must be positive, --lr greater than 0")
    return args


def evaluate(model, images, labels, batch_size=512):
    """Test accuracy in evaluation mode, without recording a graph."""
    was_training = model.training
    model.eval()
    correct = 0
    with lz.no_grad():
        for i in range(0, len(images), batch_size):
            logits = model(images[i:i + batch_size]).data
            correct += int((logits.argmax(axis=1) == labels[i:i + batch_size]).sum())
    model.train(was_training)
    return correct / len(images)


def train(model, loader, test_set, epochs, lr, show_progress=True):
    """Adam with a per-step cosine schedule; returns per-epoch loss and accuracies.
    Progress: a bar on a terminal, a plain line per epoch in a log (``EpochProgress``)."""
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * len(loader))
    history = {"train_loss": [], "train_acc": [], "test_acc": []}
    progress = EpochProgress(0, epochs, epochs, quiet=not show_progress,
                             desc=f"training {type(model).__name__}")
    for epoch in progress:
        model.train()
        loss_sum = correct = seen = 0
        for x, t in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(t)
            correct += int((logits.data.argmax(axis=1) == t).sum())
            seen += len(t)
        history["train_loss"].append(loss_sum / seen)
        history["train_acc"].append(correct / seen)
        history["test_acc"].append(evaluate(model, *test_set))
        progress.show({key: values[-1] for key, values in history.items()})
    return history


def plot_curves(history, path):
    """Training loss and train/test accuracy per epoch, written atomically as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from lezero.utils.files import atomic_write

    epochs = np.arange(1, len(history["train_loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.4))
    ax_loss.plot(epochs, history["train_loss"], marker="o", ms=3)
    ax_loss.set(xlabel="epoch", ylabel="cross entropy", title="training loss", yscale="log")
    ax_acc.plot(epochs, np.array(history["train_acc"]) * 100, marker="o", ms=3, label="train")
    ax_acc.plot(epochs, np.array(history["test_acc"]) * 100, marker="o", ms=3, label="test")
    ax_acc.axhline(TARGET_ACCURACY * 100, color="grey", ls="--", lw=1, label="97% target")
    ax_acc.set(xlabel="epoch", ylabel="accuracy (%)", title="accuracy", ylim=(50, 100.5))
    ax_acc.legend(loc="lower right")
    fig.suptitle("LeNet-5 on scikit-learn's handwritten digits (LeZero)")
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


def main(argv=None):
    """Run the demo; returns a dict with the accuracies, timings and file paths."""
    args = parse_args(argv)
    lz.manual_seed(args.seed)
    lz.utils.keep_freed_memory()     # reuse freed arrays: fewer page faults per step
    train_set, test_set = Digits(train=True), Digits(train=False)
    loader = DataLoader(TensorDataset(train_set.data, train_set.targets),
                        batch_size=args.batch_size, shuffle=True, seed=args.seed)
    test_arrays = (test_set.data, test_set.targets)
    model = LeNet5(num_classes=10, in_channels=1, input_size=8)

    start = time.perf_counter()
    with runtime.limited_to(args.threads):   # small products: see its docstring
        history = train(model, loader, test_arrays, args.epochs, args.lr,
                        show_progress=not args.no_progress)
    train_seconds = time.perf_counter() - start
    accuracy = history["test_acc"][-1]

    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, MODEL_FILE)
    model.save(model_path)
    fresh = LeNet5(num_classes=10, in_channels=1, input_size=8)
    fresh.load(model_path)
    reloaded = evaluate(fresh, *test_arrays)
    curve_path = os.path.join(args.out, CURVE_FILE)
    plot_curves(history, curve_path)

    result = {"accuracy": accuracy, "reloaded_accuracy": reloaded,
              "train_seconds": train_seconds, "parameters": model.num_parameters(),
              "epochs": args.epochs, "model_path": model_path, "curve_path": curve_path,
              "history": history}
    print_report(result, len(train_set), len(test_set))
    if args.record:
        record_report(report_lines(result, len(train_set), len(test_set)),
                      [a for a in (sys.argv[1:] if argv is None else argv) if a != "--record"])
    if reloaded != accuracy:
        raise SystemExit(f"demo: the reloaded model scored {reloaded:.4f}, not {accuracy:.4f}")
    return result


def report_lines(r, n_train, n_test):
    """The report's lines: data, size, time, loss and both accuracies, the files."""
    ok = "reached" if r["accuracy"] >= TARGET_ACCURACY else "MISSED"
    same = "same as trained" if r["reloaded_accuracy"] == r["accuracy"] else "DIFFERENT"
    return [
        "LeZero demo: LeNet-5 on scikit-learn's handwritten digits (8x8 real scans)",
        f"  data               {n_train} training / {n_test} test images, fixed split",
        f"  parameters         {r['parameters']:,}",
        f"  training           {r['epochs']} epochs in {r['train_seconds']:.1f} s",
        f"  final train loss   {r['history']['train_loss'][-1]:.4f}",
        f"  test accuracy      {r['accuracy'] * 100:.2f}%  "
        f"(target {TARGET_ACCURACY * 100:.0f}%: {ok})",
        f"  reloaded accuracy  {r['reloaded_accuracy'] * 100:.2f}%  ({same})",
        f"  model file         {r['model_path']}",
        f"  training curves    {r['curve_path']}"]


def print_report(r, n_train, n_test):
    print()
    print("\n".join(report_lines(r, n_train, n_test)))


def record_report(lines, argv):
    """Save the report as the figures block ``demo`` (docs/figures/demo.md, copied into
    the README by tools/doc_figures.py), under the command and the date."""
    import datetime
    import platform
    tools = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
    if not os.path.exists(os.path.join(tools, "doc_figures.py")):
        raise SystemExit("demo: --record writes into a checkout's docs/ (tools/doc_figures.py "
                         "is not beside this lezero package)")
    sys.path.insert(0, tools)
    from doc_figures import record
    command = " ".join(["python -m lezero.demo", *argv])
    head = (f"Last output of `{command}` ({datetime.date.today().isoformat()}, "
            f"{platform.machine()}, {os.cpu_count()} cores; `make figures` reruns it):")
    body = "\n".join(lines)
    record("demo", f"{head}\n\n```text\n{body}\n```")
    print("recorded as docs/figures/demo.md")


if __name__ == "__main__":
    main()
