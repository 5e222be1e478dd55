"""Variable-length batching: a bucketing batch sampler and a pad-and-mask collate.

Padding a batch of sequences to its longest member wastes the padded positions.  Random
batches mix short and long sequences and waste a lot; ``BucketBatchSampler`` batches
sequences of similar length together (while still shuffling) and reports the waste.
"""

import numpy as np

from lezero.data._random import check_generator, draw_seed
from lezero.data.collate import default_collate
from lezero.data.sampler import Sampler, positive_int

__all__ = ["BucketBatchSampler", "PadCollate", "pad_sequence", "padding_waste"]


def padding_waste(batches, lengths):
    """Padding statistics of ``batches`` (lists of indices) padded to their longest member.

    Returns a dict: ``tokens`` (real positions), ``padded`` (positions after padding) and
    ``waste`` (the fraction of padded positions that are padding, 0 when nothing is).
    """
    lengths = np.asarray(lengths)
    tokens = padded = 0
    for batch in batches:
        lens = lengths[np.asarray(batch, dtype=np.int64)]
        tokens += int(lens.sum())
        padded += int(lens.max()) * len(lens) if len(lens) else 0
    waste = (padded - tokens) / padded if padded else 0.0
    return {"tokens": tokens, "padded": padded, "waste": waste}


class BucketBatchSampler(Sampler):
    """Batches of indices whose sequences have similar ``lengths``; pass it to a
    ``DataLoader`` as ``batch_sampler``.

    Each epoch shuffles the indices, cuts them into pools of ``bucket_size`` batches, sorts
    each pool by length, cuts the pools into batches and shuffles the order of the batches.
    So batches are random from epoch to epoch but hold neighbours in length.  Every index
    appears exactly once per epoch (``drop_last`` drops the one short batch, if any).
    ``padding_stats()`` reports the waste of the last epoch.
    """

    def __init__(self, lengths, batch_size, drop_last=False, shuffle=True, bucket_size=50,
                 generator=None):
        lengths = np.asarray(lengths)
        if lengths.size == 0:
            lengths = lengths.astype(np.int64)
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or np.any(lengths < 0):
            raise ValueError(f"BucketBatchSampler: lengths must be a 1-D sequence of "
                             f"non-negative ints, got dtype {lengths.dtype} shape "
                             f"{lengths.shape}")
        for name, value in (("batch_size", batch_size), ("bucket_size", bucket_size)):
            positive_int("BucketBatchSampler", name, value)
        self.lengths = lengths
        self.batch_size = int(batch_size)
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.bucket_size = int(bucket_size)
        self.generator = check_generator("BucketBatchSampler", generator)
        self._last_epoch = None

    def _batches(self):
        n, bs = len(self.lengths), self.batch_size
        rng = self.generator if self.generator is not None else np.random.default_rng(
            draw_seed())
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        # A pool is a whole number of batches, so only the very last batch can be short.
        pool = bs * self.bucket_size
        batches = []
        for start in range(0, n, pool):
            chunk = order[start:start + pool]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches.extend(chunk[i:i + bs].tolist() for i in range(0, len(chunk), bs))
        if batches and len(batches[-1]) < bs and self.drop_last:
            batches.pop()
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __iter__(self):
        batches = self._batches()
        self._last_epoch = batches
        return iter(batches)

    def __len__(self):
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def padding_stats(self):
        """``padding_waste`` of the last epoch's batches (None before the first epoch)."""
        if self._last_epoch is None:
            return None
        return padding_waste(self._last_epoch, self.lengths)


def pad_sequence(sequences, batch_first=True, padding_value=0):
    """Stack arrays of shapes ``(L_i, *rest)`` into ``(B, L_max, *rest)`` (or
    ``(L_max, B, *rest)`` with ``batch_first=False``), filling with ``padding_value``."""
    seqs = [np.asarray(s) for s in sequences]
    if not seqs:
        raise ValueError("pad_sequence: got no sequences")
    rest = seqs[0].shape[1:]
    for i, s in enumerate(seqs):
        if s.ndim == 0 or s.shape[1:] != rest:
            raise ValueError(f"pad_sequence: sequence {i} has shape {s.shape}; all must be "
                             f"(length, *{rest})")
    longest = max(len(s) for s in seqs)
    dtype = np.result_type(*seqs)
    out = np.full((len(seqs), longest) + rest, padding_value, dtype=dtype)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out if batch_first else np.swapaxes(out, 0, 1)


class PadCollate:
    """A collate_fn for variable-length sequences: pad them and return a mask.

    A sample is either a sequence (an array whose first axis is its length) or a tuple
    whose first field is one, followed by fixed-size fields.  The batch is
    ``(padded, mask, *other_fields)``: ``padded`` is ``(B, L_max, ...)``, ``mask`` is a
    ``(B, L_max)`` bool array, True at real positions.  The other fields go through
    ``default_collate``.
    """

    def __init__(self, padding_value=0):
        self.padding_value = padding_value

    def __call__(self, batch):
        if not batch:
            raise ValueError("PadCollate: got an empty batch")
        tupled = isinstance(batch[0], (tuple, list))
        seqs = [s[0] if tupled else s for s in batch]
        padded = pad_sequence(seqs, batch_first=True, padding_value=self.padding_value)
        lengths = np.array([len(s) for s in seqs])
        mask = np.arange(padded.shape[1])[None, :] < lengths[:, None]
        if not tupled:
            return padded, mask
        others = default_collate([tuple(s[1:]) for s in batch]) if len(batch[0]) > 1 else []
        return (padded, mask, *others)

    def __repr__(self):
        return f"PadCollate(padding_value={self.padding_value!r})"
