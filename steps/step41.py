"""Step 41: datasets: what a model reads, one sample at a time.

A map-style dataset is anything with ``__getitem__(i)`` and ``__len__``.  LeZero's
``lezero.data`` follows ``torch.utils.data``: ``TensorDataset`` wraps arrays, ``Subset`` and
``random_split`` carve a dataset up, ``a + b`` concatenates, and the datasets in
``lezero.data.datasets`` range from a toy (Spiral) to real scans (Digits) and text.
Transforms (``lezero.data.transforms``) turn a raw sample into what the model wants.
Run: python steps/step41.py
"""
import numpy as np

import lezero as lz
from lezero.data import Dataset, TensorDataset, random_split
from lezero.data import transforms as T
from lezero.data.datasets import CharDataset, Digits, Spiral

lz.manual_seed(0)


class Squares(Dataset):
    """The smallest dataset: sample i is (i, i squared)."""

    def __len__(self):
        return 5

    def __getitem__(self, i):
        if not 0 <= i < 5:
            raise IndexError(i)
        return i, i * i


print("Squares:", [Squares()[i] for i in range(len(Squares()))])
both = Squares() + Squares()
print("Squares + Squares has", len(both), "samples; sample 7 is", both[7])

# Arrays in memory: sample i is (x[i], t[i]).
x, t = np.arange(12, dtype=np.float32).reshape(6, 2), np.array([0, 1, 0, 1, 1, 0])
pairs = TensorDataset(x, t)
print("TensorDataset sample 4:", pairs[4])

# The spiral toy problem: 300 points, 3 classes.
spiral = Spiral()
point, label = spiral[0]
print(f"Spiral: {len(spiral)} points, first {point.round(3)} of class {label}, "
      f"class counts {np.bincount(spiral.targets).tolist()}")

# Real data: scikit-learn's 8x8 handwritten digits, with a train/validation split.
digits = Digits(train=True)
train, val = random_split(digits, [0.8, 0.2], generator=np.random.default_rng(0))
print(f"Digits: {len(digits)} train images -> {len(train)} train + {len(val)} validation;"
      f" pixel range [{digits.data.min():.1f}, {digits.data.max():.1f}]")

# A transform pipeline: shift the digit by up to one pixel, then add a channel axis.
augment = T.Compose([T.RandomCrop(8, padding=1), T.ToCHW()])
shifted = Digits(train=True, transform=augment)
img, label = shifted[0]
print("augmented digit:", img.shape, img.dtype, "label", label)

# Text: windows of characters for a character-level language model.
text = CharDataset(seq_len=24)
xs, ys = text[100]
print(f"corpus: {len(text.text)} characters, vocabulary of {text.vocab_size}")
print(f"  input  {text.decode(xs)!r}\n  target {text.decode(ys)!r}")
