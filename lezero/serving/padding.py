"""Variable-length samples: length buckets, padding into one batch, the mask, the cut back.

Requests whose samples differ in length along one axis (a sentence of 7 tokens, another of
41) cannot be stacked as they are.  ``Padding`` describes how the batcher makes them fit:

* each sample's *length* is its size along ``axis`` (an axis of the sample, before the
  batch axis is added);
* with ``buckets=[16, 32, 64]`` a sample of length 20 joins bucket 32: only samples of the
  same bucket share a batch, so a short sentence never waits beside a long one and little
  padding is wasted.  Lengths above the last boundary share one overflow bucket;
* a batch is padded with ``value`` to its longest sample (or to the bucket's boundary with
  ``pad_to_bucket=True``, which gives a few fixed shapes: what a static graph wants);
* the model receives ``fn(*batches, mask)`` where ``mask`` is a bool array (N, L) that is
  True at real positions (``pass_mask=False`` leaves it out);
* every output is cut back to its request's length along ``unpad_axis`` (an axis of the
  output sample; ``"same"`` means ``axis``; ``None`` leaves outputs whole, e.g. for one
  label per sequence; a tuple gives one entry per output).
"""
import bisect

from lezero import cuda
from lezero.utils.checks import check_bool, check_int, check_number, check_type, is_int

__all__ = ["Padding", "stack_samples", "pad_samples"]


def stack_samples(samples):
    """Samples of one shape stacked on a new axis 0."""
    xp = cuda.get_array_module(samples[0])
    return xp.stack(samples)


def pad_samples(samples, axis, length, value=0):
    """Samples that differ only along ``axis``, padded with ``value`` to ``length`` and
    stacked: returns ``(batch, mask)``, mask (N, length) bool, True at real positions."""
    first = samples[0]
    xp = cuda.get_array_module(first)
    shape = list(first.shape)
    shape[axis] = length
    batch = xp.full((len(samples),) + tuple(shape), value, dtype=first.dtype)
    mask = xp.zeros((len(samples), length), dtype=bool)
    for i, s in enumerate(samples):
        n = s.shape[axis]
        index = (i,) + (slice(None),) * axis + (slice(0, n),)
        batch[index] = s
        mask[i, :n] = True
    return batch, mask


class Padding:
    """How a ``DynamicBatcher`` batches samples of different lengths (see the module
    docstring).  ``axis`` is an axis of one sample (0 for a (T, features) sequence)."""

    def __init__(self, axis=0, value=0, buckets=None, pad_to_bucket=False, pass_mask=True,
                 unpad_axis="same"):
        where = "Padding"
        self.axis = check_int(where, "axis", axis, low=0)
        self.value = check_number(where, "value", value)
        if buckets is not None:
            check_type(where, "buckets", buckets, (list, tuple), "a list of lengths")
            if not buckets or not all(is_int(b) and b >= 1 for b in buckets):
                raise ValueError(f"{where}: buckets must be positive ints, got {buckets!r}")
            if list(buckets) != sorted(set(buckets)):
                raise ValueError(f"{where}: buckets must be increasing, got {buckets!r}")
            buckets = [int(b) for b in buckets]
        self.buckets = buckets
        self.pad_to_bucket = check_bool(where, "pad_to_bucket", pad_to_bucket)
        if self.pad_to_bucket and buckets is None:
            raise ValueError(f"{where}: pad_to_bucket=True needs buckets")
        self.pass_mask = check_bool(where, "pass_mask", pass_mask)
        self.unpad_axis = self._check_unpad(unpad_axis)

    def _check_unpad(self, unpad_axis):
        if unpad_axis == "same":
            return self.axis
        entries = unpad_axis if isinstance(unpad_axis, (tuple, list)) else (unpad_axis,)
        for a in entries:
            if a is not None:
                check_int("Padding", "unpad_axis", a, low=0)
        return tuple(unpad_axis) if isinstance(unpad_axis, list) else unpad_axis

    def __repr__(self):
        return (f"Padding(axis={self.axis}, value={self.value:g}, buckets={self.buckets}, "
                f"pad_to_bucket={self.pad_to_bucket}, pass_mask={self.pass_mask}, "
                f"unpad_axis={self.unpad_axis})")

    # ----- used by the batcher ---------------------------------------------------------
    def length_of(self, inputs):
        """The sample's length; every input of a sample must share it."""
        lengths = set()
        for i, x in enumerate(inputs):
            if x.ndim <= self.axis:
                raise ValueError(f"DynamicBatcher: input {i} has shape {tuple(x.shape)}, "
                                 f"which has no padding axis {self.axis}")
            lengths.add(int(x.shape[self.axis]))
        if len(lengths) != 1:
            raise ValueError(f"DynamicBatcher: the inputs of one sample must share their "
                             f"length along axis {self.axis}, got {sorted(lengths)}")
        length = lengths.pop()
        if length < 1:
            raise ValueError("DynamicBatcher: a sample of length 0 cannot be padded")
        return length

    def bucket_of(self, length):
        """Index of the bucket a length falls in (len(buckets) is the overflow bucket)."""
        if self.buckets is None:
            return 0
        return bisect.bisect_left(self.buckets, length)

    def padded_length(self, lengths, bucket):
        """The length a batch of these samples is padded to."""
        longest = max(lengths)
        if self.pad_to_bucket and bucket < len(self.buckets):
            return self.buckets[bucket]
        return longest

    def collate(self, per_input, lengths, bucket):
        """Pad each input's samples: returns ``(batches, mask, padded_length)``."""
        length = self.padded_length(lengths, bucket)
        batches, mask = [], None
        for samples in per_input:
            batch, mask = pad_samples(samples, self.axis, length, self.value)
            batches.append(batch)
        return batches, mask, length

    def unpad(self, output_index, array, length, padded_length):
        """One sample's output cut back to its length (``array`` has no batch axis)."""
        axis = self.unpad_axis
        if isinstance(axis, tuple):
            axis = axis[output_index] if output_index < len(axis) else None
        if axis is None:
            return array
        if array.ndim <= axis or array.shape[axis] != padded_length:
            raise ValueError(
                f"DynamicBatcher: output {output_index} has per-sample shape "
                f"{tuple(array.shape)}, whose axis {axis} is not the padded length "
                f"{padded_length}; set Padding(unpad_axis=...) to the output's sequence "
                f"axis, or None to return it whole")
        return array[(slice(None),) * axis + (slice(0, length),)]
