"""Small in-memory datasets for first experiments: Spiral, SinCurve and Digits."""
import gzip
import importlib.util
import os

import numpy as np

from lezero.data.dataset import Dataset

__all__ = ["ArrayDataset", "Spiral", "SinCurve", "Digits", "get_spiral"]


class ArrayDataset(Dataset):
    """Samples ``(data[i], targets[i])`` from in-memory arrays, with optional transforms
    (the base of the small datasets here and of MNIST-style ones)."""

    def __init__(self, data, targets, transform=None, target_transform=None):
        if targets is not None and len(data) != len(targets):
            raise ValueError(f"{type(self).__name__}: {len(data)} samples but "
                             f"{len(targets)} targets")
        self.data, self.targets = data, targets
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        x = self.data[index]
        if self.transform is not None:
            x = self.transform(x)
        if self.targets is None:
            return x
        t = self.targets[index]
        t = t.item() if isinstance(t, np.generic) else t
        if self.target_transform is not None:
            t = self.target_transform(t)
        return x, t


def get_spiral(train=True, num_data=100, num_class=3):
    """Points on ``num_class`` interleaved noisy spiral arms (the classic toy problem):
    ``x`` float32 (N, 2), ``t`` int64 (N,).  Train and test use different fixed seeds."""
    rng = np.random.default_rng(1984 if train else 2020)
    n = num_data * num_class
    x = np.zeros((n, 2), dtype=np.float32)
    t = np.zeros(n, dtype=np.int64)
    for c in range(num_class):
        rate = np.arange(num_data) / num_data
        radius = 1.0 * rate
        theta = c * 4.0 + 4.0 * rate + rng.standard_normal(num_data) * 0.2
        rows = slice(c * num_data, (c + 1) * num_data)
        x[rows, 0] = radius * np.sin(theta)
        x[rows, 1] = radius * np.cos(theta)
        t[rows] = c
    order = rng.permutation(n)
    return x[order], t[order]


class Spiral(ArrayDataset):
    """Three spiral arms in 2-D, 300 points: ``(x (2,) float32, class int)``."""

    def __init__(self, train=True, transform=None, target_transform=None):
        super().__init__(*get_spiral(train), transform, target_transform)


class SinCurve(ArrayDataset):
    """A noisy sine wave over 1000 steps for sequence models: sample ``i`` is
    ``(y[i], y[i + 1])``, each of shape (1,); the test split has no noise."""

    def __init__(self, train=True, num_steps=1000, transform=None, target_transform=None):
        x = np.linspace(0, 2 * np.pi, num_steps + 1)
        y = np.sin(x)
        if train:
            y = y + np.random.default_rng(0).uniform(-0.05, 0.05, size=y.shape)
        y = y.astype(np.float32).reshape(-1, 1)
        super().__init__(y[:-1], y[1:], transform, target_transform)


class Digits(ArrayDataset):
    """scikit-learn's handwritten digits (real data: 1797 scans of 8x8 pixels, 10 classes).

    ``data`` is float32 (N, 8, 8) in [0, 1] (the raw 0..16 levels / 16), ``targets`` int64.
    A fixed random 80/20 split (seed 0) gives 1438 train and 359 test images.
    """

    def __init__(self, train=True, transform=None, target_transform=None):
        pixels, targets = _load_digits()
        images = (pixels.reshape(-1, 8, 8) / 16.0).astype(np.float32)
        order = np.random.default_rng(0).permutation(len(targets))
        cut = int(round(0.8 * len(order)))
        keep = order[:cut] if train else order[cut:]
        self.classes = [str(i) for i in range(10)]
        super().__init__(images[keep], targets[keep], transform, target_transform)


def _load_digits():
    """scikit-learn's digits as (pixels (N, 64) 0..16, targets int64).

    Read straight from the CSV that scikit-learn ships: importing sklearn itself takes
    seconds, and only its data file is needed."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("Digits needs scikit-learn, which ships the data: "
                          "pip install scikit-learn")
    path = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data",
                        "digits.csv.gz")
    if not os.path.isfile(path):       # a layout we do not know: let sklearn find it
        from sklearn.datasets import load_digits
        d = load_digits()
        return d.data, d.target.astype(np.int64)
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    return table[:, :-1], table[:, -1]
