"""Real data: scikit-learn's digits, and Fashion-MNIST where Debian's package is installed.

A softmax regression written with core LeZero operators trains on batches from worker
processes and must reach an accuracy no guessing gets near."""
import os

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.data import DataLoader, Subset
from lezero.data.datasets import DEBIAN_FASHION_MNIST, Digits, FashionMNIST


def flatten(image):
    """A transform: image -> flat float32 vector in [0, 1] (module level: picklable)."""
    x = np.asarray(image, dtype=np.float32).reshape(-1)
    return x / 255.0 if image.dtype == np.uint8 else x


def train_softmax_regression(train_set, test_set, n_in, epochs, lr, num_workers):
    rng = np.random.default_rng(0)
    W = lz.Variable(rng.normal(0, 0.01, (n_in, 10)).astype(np.float32))
    b = lz.Variable(np.zeros(10, np.float32))
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=num_workers,
                        seed=0, persistent_workers=num_workers > 0)
    losses = []
    for _ in range(epochs):
        for x, t in loader:
            z = F.matmul(x, W) + b
            z = z - z.data.max(axis=1, keepdims=True)            # a constant shift
            logp = z - F.log(F.sum(F.exp(z), axis=1, keepdims=True))
            loss = -F.sum(F.get_item(logp, (np.arange(len(t)), t))) / len(t)
            W.cleargrad()
            b.cleargrad()
            loss.backward()
            W.data -= lr * W.grad.data
            b.data -= lr * b.grad.data
            losses.append(float(loss.data))
    correct = total = 0
    for x, t in DataLoader(test_set, batch_size=500):
        pred = (x @ W.data + b.data).argmax(axis=1)
        correct += int((pred == t).sum())
        total += len(t)
    return losses, correct / total


@pytest.mark.timeout(120)
def test_digits_real_data_trains_with_workers():
    train = Digits(train=True, transform=flatten)
    test = Digits(train=False, transform=flatten)
    assert (len(train), len(test)) == (1438, 359)
    assert sorted(set(train.targets.tolist())) == list(range(10))
    losses, acc = train_softmax_regression(train, test, 64, epochs=6, lr=0.5, num_workers=2)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert acc > 0.85


@pytest.mark.timeout(180)
@pytest.mark.skipif(not os.path.isdir(DEBIAN_FASHION_MNIST),
                    reason="Debian's dataset-fashion-mnist package is not installed")
def test_fashion_mnist_from_debian_trains():
    train = FashionMNIST(DEBIAN_FASHION_MNIST, train=True, transform=flatten)
    test = FashionMNIST(DEBIAN_FASHION_MNIST, train=False, transform=flatten)
    assert (len(train), len(test)) == (60000, 10000)
    assert np.bincount(train.targets).tolist() == [6000] * 10       # the real, balanced set
    losses, acc = train_softmax_regression(Subset(train, range(6000)),
                                           Subset(test, range(2000)), 784, epochs=2,
                                           lr=0.2, num_workers=2)
    assert acc > 0.7                                                   # guessing: 0.1
