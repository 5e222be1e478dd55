"""The ``make demo`` training run, LeZero vs PyTorch CPU: LeNet-5 on scikit-learn's
digits (1,438 training images of 8x8), batches of 64, Adam; same weights, same batch
order, same thread count, one process.

    python benchmarks/bench_digits_cnn.py        # BENCH_THREADS=n picks the thread count

Reported: seconds per training epoch (23 steps) and epochs per second, best of several
epochs timed in alternation; the first epoch of each (compilation, caches) is excluded.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402
from _common import interleaved_best, limit_threads  # noqa: E402

BATCH, LR = 64, 1e-2


def load():
    from lezero.data.datasets import Digits
    ds = Digits(train=True)
    return np.ascontiguousarray(ds.data[:, None]), ds.targets


def epoch_orders(n, epochs=64):
    rng = np.random.default_rng(0)
    return [rng.permutation(n) for _ in range(epochs)]


def lezero_epoch_fn(x, t, orders):
    import lezero as lz
    import lezero.functions as F
    from lezero import optim
    from lezero.nn.models import LeNet5
    lz.manual_seed(0)
    model = LeNet5(input_size=8)
    opt = optim.Adam(model.parameters(), lr=LR)
    epoch = iter(orders)

    def run():
        order, total = next(epoch), 0.0
        for i in range(0, len(order), BATCH):
            idx = order[i:i + BATCH]
            loss = F.cross_entropy(model(x[idx]), t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        return total
    return model, run


def torch_epoch_fn(state_dict, x, t, orders):
    import torch
    from torch import nn
    model = nn.Module()
    model.features = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(6, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2))
    model.classifier = nn.Sequential(nn.Linear(64, 120), nn.ReLU(), nn.Linear(120, 84),
                                     nn.ReLU(), nn.Linear(84, 10))
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state_dict.items()})
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    xt, tt = torch.from_numpy(x), torch.from_numpy(t)
    epoch = iter(orders)

    def run():
        order, total = torch.from_numpy(next(epoch)), 0.0
        for i in range(0, len(order), BATCH):
            idx = order[i:i + BATCH]
            h = model.features(xt[idx])
            loss = nn.functional.cross_entropy(model.classifier(h.flatten(1)), tt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        return total
    return run


def main():
    threads = set_threads()
    limit_threads(threads)
    x, t = load()
    orders = epoch_orders(len(x))
    model, ours = lezero_epoch_fn(x, t, orders)
    theirs = torch_epoch_fn(model.state_dict(), x, t, orders)
    # Same weights and batches: the first epoch's summed losses agree closely.
    first_ours, first_theirs = ours(), theirs()
    assert abs(first_ours - first_theirs) < 1e-3 * abs(first_theirs), \
        f"the two runs differ: {first_ours} and {first_theirs}"
    t_ours, t_theirs = interleaved_best([ours, theirs], rounds=6, warmup=1)
    steps = -(-len(x) // BATCH)
    report(f"LeNet-5 on digits, one training epoch ({len(x)} images, {steps} steps of "
           f"{BATCH}, Adam; {threads} threads)",
           [("LeZero epoch vs PyTorch", t_ours, t_theirs, None)])
    print(f"epochs per second: LeZero {1 / t_ours:.1f}, PyTorch {1 / t_theirs:.1f}; "
          f"per step: LeZero {t_ours / steps * 1e3:.2f} ms, PyTorch "
          f"{t_theirs / steps * 1e3:.2f} ms")
    print(f"first-epoch summed losses: LeZero {first_ours:.5f}, PyTorch {first_theirs:.5f}")


if __name__ == "__main__":
    run_main(main)
