"""A small text corpus and a character-level language-modelling dataset.

The packaged corpus (``tiny_corpus.txt``, about 6 KB) is a short story written for this
project, so it can be shipped and reused freely.
"""
import os

import numpy as np

from lezero.data.dataset import Dataset

__all__ = ["load_corpus", "CharDataset"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def load_corpus(name="tiny_corpus"):
    """The text of a corpus shipped with LeZero (``lezero/data/datasets/<name>.txt``)."""
    shipped = sorted(f[:-4] for f in os.listdir(_HERE) if f.endswith(".txt"))
    if name not in shipped:             # a name, never a path that could leave the folder
        raise FileNotFoundError(f"load_corpus: no corpus {name!r}; shipped: {shipped}")
    with open(os.path.join(_HERE, f"{name}.txt"), encoding="utf-8") as f:
        return f.read()


class CharDataset(Dataset):
    """Windows of a text as character ids, for next-character prediction.

    Sample ``i`` is ``(x, y)``: ``x`` the ids of characters ``[i*stride, i*stride + seq_len)``
    and ``y`` the same window shifted by one character (int64 arrays of length
    ``seq_len``).  ``vocab`` is the sorted list of characters; ``encode`` / ``decode``
    convert between strings and ids.
    """

    def __init__(self, text=None, seq_len=64, stride=1):
        self.text = load_corpus() if text is None else text
        if not isinstance(self.text, str):
            raise TypeError(f"CharDataset: text must be a str, got {type(self.text).__name__}")
        for name, value in (("seq_len", seq_len), ("stride", stride)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"CharDataset: {name} must be a positive int, got {value!r}")
        if len(self.text) < seq_len + 1:
            raise ValueError(f"CharDataset: text of {len(self.text)} characters is too short "
                             f"for seq_len={seq_len}")
        self.seq_len, self.stride = seq_len, stride
        self.vocab = sorted(set(self.text))
        self.stoi = {c: i for i, c in enumerate(self.vocab)}
        self.ids = self.encode(self.text)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def encode(self, s):
        """Ids (int64 array) of the characters of ``s``; unknown characters raise."""
        try:
            return np.array([self.stoi[c] for c in s], dtype=np.int64)
        except KeyError as e:
            raise ValueError(f"CharDataset.encode: character {e.args[0]!r} is not in the "
                             f"vocabulary") from None

    def decode(self, ids):
        """The string of a sequence of ids."""
        return "".join(self.vocab[int(i)] for i in ids)

    def __len__(self):
        return (len(self.ids) - 1 - self.seq_len) // self.stride + 1

    def __getitem__(self, index):
        if not -len(self) <= index < len(self):
            raise IndexError(f"CharDataset: index {index} out of range for {len(self)} "
                             f"windows")
        start = (index % len(self)) * self.stride
        window = self.ids[start:start + self.seq_len + 1]
        return window[:-1].copy(), window[1:].copy()
