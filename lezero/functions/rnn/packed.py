"""Packed sequences: a batch of variable-length sequences stored without padding.

``PackedSequence.data`` holds the time steps one after another, each step holding only
the sequences still running (longest first); ``batch_sizes[t]`` says how many.  A
recurrent layer then computes, at step ``t``, only the first ``batch_sizes[t]`` rows: no
work is spent on padding.  Names, arguments and layouts follow
``torch.nn.utils.rnn`` (``sorted_indices`` / ``unsorted_indices`` when the batch had to
be sorted by length).

Packing gathers rows and unpacking scatters them back; the two are each other's gradient.
"""
from typing import NamedTuple

import numpy as np

from lezero import cuda
from lezero.core import Function, Variable
from lezero.functions.common import xp_of
from lezero.functions.registry import register
from lezero.functions.shape import concatenate, reshape
from lezero.utils.checks import check_array, check_bool, check_int, check_number

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence"]


class PackedSequence(NamedTuple):
    """``data`` (sum of lengths, *), ``batch_sizes`` (int64 NumPy array, one per step),
    and the permutations between the caller's batch order and length order (or None)."""
    data: Variable
    batch_sizes: np.ndarray
    sorted_indices: np.ndarray = None
    unsorted_indices: np.ndarray = None


class _RowGather(Function):
    """``y = x[rows]`` along axis 0 (rows distinct); the gradient scatters back."""

    def __init__(self, rows, n_rows):
        self.rows = rows
        self.n_rows = n_rows

    def forward(self, x):
        return x[self.rows]

    def backward(self, gy):
        return _RowScatter(self.rows, self.n_rows)(gy)


class _RowScatter(Function):
    """``y = zeros((n_rows, *)); y[rows] = x``; the gradient gathers."""

    def __init__(self, rows, n_rows):
        self.rows = rows
        self.n_rows = n_rows

    def forward(self, x):
        y = xp_of(x).zeros((self.n_rows,) + x.shape[1:], dtype=x.dtype)
        y[self.rows] = x
        return y

    def backward(self, gy):
        return _RowGather(self.rows, self.n_rows)(gy)


def _lengths(op, lengths, n):
    """The lengths as a 1-D int64 NumPy array (from a list, an array or a Variable)."""
    arr = np.asarray(lengths) if isinstance(lengths, (list, tuple)) else cuda.as_numpy(lengths)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{op}: lengths must be a 1-D sequence of ints, got {lengths!r}")
    if arr.shape[0] != n:
        raise ValueError(f"{op}: got {arr.shape[0]} lengths for a batch of {n}")
    if n and arr.min() <= 0:
        raise ValueError(f"{op}: every length must be positive, got {arr.tolist()}")
    return arr.astype(np.int64)


def _batch_sizes(op, name, batch_sizes):
    """A PackedSequence's batch sizes as a 1-D int64 NumPy array, checked: positive and
    non-increasing."""
    arr = cuda.as_numpy(batch_sizes) if isinstance(batch_sizes, cuda.array_types()) \
        else np.asarray(batch_sizes)
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name}.batch_sizes must hold ints, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0 or arr.min() < 1 or np.any(np.diff(arr) > 0):
        shown = arr.tolist() if arr.size <= 20 else f"shape {arr.shape}"
        raise ValueError(f"{op}: {name}.batch_sizes must be a non-empty, non-increasing "
                         f"1-D array of positive ints, got {shown}")
    return arr.astype(np.int64)


def _permutation(op, name, indices, n):
    """``indices`` (or None) as a 1-D int64 permutation of range(n)."""
    if indices is None:
        return None
    arr = cuda.as_numpy(indices)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must hold ints, got dtype {arr.dtype}")
    if arr.shape != (n,) or not np.array_equal(np.sort(arr), np.arange(n)):
        shown = arr.tolist() if arr.size <= 20 else f"shape {arr.shape}"
        raise ValueError(f"{op}: {name} must be a permutation of range({n}) (the "
                         f"batch size, batch_sizes[0]), got {shown}")
    return arr.astype(np.int64)


def check_packed(op, sequence, name="sequence"):
    """Check a PackedSequence before a kernel walks it: ``batch_sizes`` 1-D positive
    non-increasing ints summing to ``data.shape[0]``, ``sorted_indices`` a permutation of
    the batch and ``unsorted_indices`` its inverse.  Returns ``(data array, batch_sizes,
    sorted_indices, unsorted_indices)``, NumPy int64 arrays (indices None when absent);
    errors name the argument as ``name``."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{op}: {name} must be a PackedSequence, got "
                        f"{type(sequence).__name__}")
    batch_sizes = _batch_sizes(op, name, sequence.batch_sizes)
    arr = check_array(op, f"{name}.data", sequence.data)
    if arr.ndim < 1 or arr.shape[0] != int(batch_sizes.sum()):
        raise ValueError(f"{op}: {name}.data must be (sum of batch_sizes = "
                         f"{int(batch_sizes.sum())}, *), got shape {arr.shape}")
    n = int(batch_sizes[0])
    order = _permutation(op, f"{name}.sorted_indices", sequence.sorted_indices, n)
    inverse = _permutation(op, f"{name}.unsorted_indices", sequence.unsorted_indices, n)
    if (order is None) != (inverse is None) or (
            order is not None and not np.array_equal(order[inverse], np.arange(n))):
        raise ValueError(f"{op}: {name}.unsorted_indices must be the inverse permutation "
                         f"of {name}.sorted_indices (both given, or neither)")
    return arr, batch_sizes, order, inverse


def _check_sequences(op, sequences):
    """Check a non-empty list of (L_i, *) sequences sharing their trailing dims; return
    their arrays."""
    if not isinstance(sequences, (list, tuple)) or not sequences:
        raise ValueError(f"{op}: expected a non-empty list of sequences, got {sequences!r}")
    arrs = [check_array(op, f"sequences[{i}]", s) for i, s in enumerate(sequences)]
    rest = arrs[0].shape[1:]
    if any(a.ndim == 0 or a.shape[1:] != rest for a in arrs):
        raise ValueError(f"{op}: sequences must share their trailing dims, each (L_i, *), "
                         f"got shapes {[a.shape for a in arrs]}")
    return arrs


def _packed_rows(batch_sizes, order, n, t_len, batch_first):
    """Row of the flattened padded tensor for each packed row.  ``order[j]`` is the
    caller's batch position of the j-th longest sequence."""
    rows = []
    for t, bs in enumerate(batch_sizes):
        cols = order[:bs]
        rows.append(cols * t_len + t if batch_first else t * n + cols)
    return np.concatenate(rows) if rows else np.zeros(0, np.int64)


@register("rnn", notes="returns a PackedSequence")
def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded (T, N, *) batch (``batch_first``: (N, T, *)) of sequences whose
    lengths are ``lengths``.  With ``enforce_sorted`` the lengths must be decreasing;
    otherwise the batch is sorted here and the permutation kept."""
    op = "pack_padded_sequence"
    arr = check_array(op, "input", input)
    check_bool(op, "batch_first", batch_first)
    check_bool(op, "enforce_sorted", enforce_sorted)
    if arr.ndim < 2:
        raise ValueError(f"{op}: input must be (T, N, *) or (N, T, *), got shape {arr.shape}")
    t_len, n = (arr.shape[1], arr.shape[0]) if batch_first else arr.shape[:2]
    lens = _lengths(op, lengths, n)
    if n == 0:
        raise ValueError(f"{op}: the batch is empty")
    if lens.max() > t_len:
        raise ValueError(f"{op}: a length of {int(lens.max())} exceeds the {t_len} time steps "
                         f"of the input (shape {arr.shape}, batch_first={batch_first})")
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise ValueError(f"{op}: lengths {lens.tolist()} are not sorted in decreasing "
                             "order; sort the batch or pass enforce_sorted=False")
        order, sorted_idx, unsorted_idx = np.arange(n), None, None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_idx, unsorted_idx = order, np.argsort(order)
    batch_sizes = (lens[order][None, :] > np.arange(int(lens.max()))[:, None]).sum(axis=1)
    rows = _packed_rows(batch_sizes, order, n, t_len, batch_first)
    flat = reshape(input, (t_len * n,) + arr.shape[2:])
    data = _RowGather(xp_of(arr).asarray(rows), t_len * n)(flat)
    return PackedSequence(data, batch_sizes.astype(np.int64), sorted_idx, unsorted_idx)


@register("rnn", notes="returns (padded, lengths)")
def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo ``pack_padded_sequence``: (T, N, *) (or (N, T, *)) with ``padding_value``
    after each sequence's end, and the lengths (int64) in the caller's batch order."""
    op = "pad_packed_sequence"
    arr, batch_sizes, order, _ = check_packed(op, sequence)
    check_bool(op, "batch_first", batch_first)
    check_number(op, "padding_value", padding_value)
    data = sequence.data
    n = int(batch_sizes[0])
    t_len = len(batch_sizes)
    if total_length is not None:
        if check_int(op, "total_length", total_length) < t_len:
            raise ValueError(f"{op}: total_length {total_length} is shorter than the longest "
                             f"sequence ({t_len} steps)")
        t_len = int(total_length)
    if order is None:
        order = np.arange(n)
    rows = _packed_rows(batch_sizes, order, n, t_len, batch_first)
    padded = _RowScatter(xp_of(arr).asarray(rows), t_len * n)(data)
    if padding_value != 0:
        fill = np.full((t_len * n,) + (1,) * (arr.ndim - 1), padding_value, dtype=arr.dtype)
        fill[rows] = 0
        padded = padded + Variable(xp_of(arr).asarray(fill), requires_grad=False)
    shape = ((n, t_len) if batch_first else (t_len, n)) + arr.shape[1:]
    lengths = (batch_sizes[None, :] > np.arange(n)[:, None]).sum(axis=1)[np.argsort(order)]
    return reshape(padded, shape), lengths.astype(np.int64)


@register("rnn")
def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Stack variable-length (L_i, *) sequences into (T, N, *) (or (N, T, *)) padded with
    ``padding_value``."""
    op = "pad_sequence"
    arrs = _check_sequences(op, sequences)
    rest = arrs[0].shape[1:]
    lens = np.array([a.shape[0] for a in arrs])
    n, t_len = len(arrs), int(lens.max())
    # Row of each sequence element in the flattened padded output.
    rows = np.concatenate([b * t_len + np.arange(l) if batch_first else
                           np.arange(l) * n + b for b, l in enumerate(lens)])
    data = concatenate(list(sequences), axis=0) if n > 1 else sequences[0]
    padded = _RowScatter(xp_of(arrs[0]).asarray(rows), t_len * n)(data)
    if padding_value != 0:
        fill = np.full((t_len * n,) + (1,) * len(rest), padding_value, dtype=arrs[0].dtype)
        fill[rows] = 0
        padded = padded + Variable(xp_of(arrs[0]).asarray(fill), requires_grad=False)
    return reshape(padded, ((n, t_len) if batch_first else (t_len, n)) + rest)


@register("rnn", notes="returns a PackedSequence")
def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) sequences (``pad_sequence`` then ``pack_padded_sequence``)."""
    op = "pack_sequence"
    lens = [a.shape[0] for a in _check_sequences(op, sequences)]
    if min(lens) < 1:
        raise ValueError(f"{op}: every sequence must be non-empty, got lengths {lens}")
    check_bool(op, "enforce_sorted", enforce_sorted)
    return pack_padded_sequence(pad_sequence(sequences), lens, enforce_sorted=enforce_sorted)
