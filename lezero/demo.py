"""``make demo``: train a real model on real data shipped inside a package, and report.

The data are scikit-learn's handwritten digits (1,797 real 8x8 scans, no download).
Run: python -m lezero.demo [--epochs N] [--out DIR]
"""
import argparse
import os
import time

import numpy as np

import lezero as lz
import lezero.functions as F


def load_digits_split(seed=0, test_fraction=0.2):
    """Digits as float32 images in [0, 1] with a fixed stratified-by-shuffle split."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    t = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (x[train], t[train]), (x[test], t[test])


class MLP:
    """A two-hidden-layer perceptron written with the core operators only."""

    def __init__(self, sizes, rng):
        self.params = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            w = rng.standard_normal((fan_in, fan_out)).astype(np.float32) * np.sqrt(2 / fan_in)
            self.params += [lz.Parameter(w), lz.Parameter(np.zeros(fan_out, np.float32))]

    def __call__(self, x):
        h = x.reshape(len(x), -1)
        for i in range(0, len(self.params), 2):
            h = h @ self.params[i] + self.params[i + 1]
            if i + 2 < len(self.params):
                h = F.tanh(h)
        return h


def softmax_cross_entropy(logits, t):
    """Mean cross entropy; the max shift is a constant, so gradients are unchanged."""
    shifted = logits - logits.data.max(axis=1, keepdims=True)
    log_z = F.log(F.exp(shifted).sum(axis=1, keepdims=True))
    log_p = shifted - log_z
    return -log_p[np.arange(len(t)), t].sum() / len(t)


def accuracy(model, x, t):
    with lz.no_grad():
        return float((model(x).data.argmax(axis=1) == t).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--out", default="runs/demo")
    args = parser.parse_args(argv)
    from tqdm import tqdm

    lz.manual_seed(0)
    (x_train, t_train), (x_test, t_test) = load_digits_split()
    model = MLP([64, 128, 64, 10], np.random.default_rng(0))
    n_params = sum(p.size for p in model.params)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    history = []
    bar = tqdm(range(args.epochs), desc="training", unit="epoch")
    for epoch in bar:
        order = rng.permutation(len(x_train))
        total = 0.0
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            loss = softmax_cross_entropy(model(x_train[idx]), t_train[idx])
            for p in model.params:
                p.cleargrad()
            loss.backward()
            for p in model.params:
                p.data -= args.lr * p.grad.data
            total += loss.item() * len(idx)
        history.append(total / len(x_train))
        bar.set_postfix(loss=f"{history[-1]:.4f}")
    elapsed = time.perf_counter() - start

    acc = accuracy(model, x_test, t_test)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "mlp_digits.npz")
    np.savez(path + ".tmp.npz", *[p.data for p in model.params])
    os.replace(path + ".tmp.npz", path)
    with np.load(path) as f:
        for p, k in zip(model.params, sorted(f.files, key=lambda s: int(s.split("_")[1]))):
            p.data = f[k]
    reloaded = accuracy(model, x_test, t_test)

    print("\nLeZero demo: MLP 64-128-64-10 on scikit-learn's handwritten digits")
    print(f"  training samples   {len(x_train)}   test samples {len(x_test)}")
    print(f"  parameters         {n_params}")
    print(f"  epochs             {args.epochs}   time {elapsed:.1f} s")
    print(f"  final train loss   {history[-1]:.4f}")
    print(f"  test accuracy      {acc * 100:.2f}%")
    print(f"  reloaded accuracy  {reloaded * 100:.2f}%  (from {path})")
    return acc


if __name__ == "__main__":
    main()
