"""Step 44: a training loop fed by worker processes.

Two workers read and augment the handwritten digits (a random one-pixel shift and a
little noise, both drawn from ``lezero.data.get_rng()``), while the main process trains a
two-layer network built from core operators only: matmul, add, tanh, exp, log, sum and
indexing.  ``persistent_workers`` keeps the workers between epochs; the seed makes the
whole run, augmentations included, the same on every run and for any number of workers.
Run: python steps/step44.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero.data import DataLoader, get_rng
from lezero.data import transforms as T
from lezero.data.datasets import Digits


def add_noise(image):
    """A per-sample augmentation: light Gaussian pixel noise (from the batch's stream)."""
    return image + get_rng().normal(0, 0.05, image.shape).astype(np.float32)


def flatten(image):
    return image.reshape(-1)


def cross_entropy(logits, t):
    """Mean softmax cross-entropy from core operators (a stable log-sum-exp)."""
    z = logits - logits.data.max(axis=1, keepdims=True)
    log_probs = z - F.log(F.sum(F.exp(z), axis=1, keepdims=True))
    return -F.sum(F.get_item(log_probs, (np.arange(len(t)), t))) / len(t)


def main():
    lz.manual_seed(0)
    augment = T.Compose([T.RandomApply([T.RandomCrop(8, padding=1)], p=0.3),
                         T.Lambda(add_noise), T.Lambda(flatten)])
    train = Digits(train=True, transform=augment)
    test = Digits(train=False, transform=T.Lambda(flatten))
    loader = DataLoader(train, batch_size=32, shuffle=True, num_workers=2, seed=49,
                        persistent_workers=True)

    rng = np.random.default_rng(0)
    params = {"W1": lz.Variable((rng.standard_normal((64, 64)) / 8).astype(np.float32)),
              "b1": lz.Variable(np.zeros(64, np.float32)),
              "W2": lz.Variable((rng.standard_normal((64, 10)) / 8).astype(np.float32)),
              "b2": lz.Variable(np.zeros(10, np.float32))}

    def model(x):
        h = F.tanh(F.matmul(x, params["W1"]) + params["b1"])
        return F.matmul(h, params["W2"]) + params["b2"]

    def accuracy(dataset):
        correct = 0
        with lz.no_grad():
            for x, t in DataLoader(dataset, batch_size=256):
                correct += int((model(x).data.argmax(axis=1) == t).sum())
        return correct / len(dataset)

    lr = 0.2
    for epoch in range(10):
        total = 0.0
        for x, t in loader:
            loss = cross_entropy(model(x), t)
            for p in params.values():
                p.cleargrad()
            loss.backward()
            for p in params.values():
                p.data -= lr * p.grad.data
            total += float(loss.data) * len(t)
        print(f"epoch {epoch + 1}: train loss {total / len(train):.3f}, "
              f"test accuracy {accuracy(test):.3f}")
    print(f"final test accuracy {accuracy(test):.3f} on {len(test)} held-out digits")


if __name__ == "__main__":
    main()
