"""The bag plan of ``embedding_bag`` and its argument checks: which input entries are kept
and which bag each belongs to, built once per call from the indices, ``offsets`` and
``padding_idx``."""
import numpy as np

from lezero.utils.checks import check_array, check_bool, check_float_array, check_real

OP = "embedding_bag"
MODES = ("sum", "mean", "max")


class Bags:
    """The bag plan: which input entries are kept and where each one goes.

    ``idx``, ``seg``, ``pos``: per kept entry, its weight row, its bag and its position in
    the flattened input (all sorted by bag).  ``sizes``: kept entries per bag.  ``num``:
    weight rows.  ``shape``: the input's shape (that of per_sample_weights).
    """

    def __init__(self, idx, seg, pos, sizes, num, shape):
        self.idx, self.seg, self.pos, self.sizes = idx, seg, pos, sizes
        self.num, self.shape = num, shape
        self.n_bags = sizes.shape[0]


def int_array(name, x):
    arr = check_array(OP, name, x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{OP}: {name} must hold integers, got dtype {arr.dtype}")
    return arr


def bag_bounds(xp, indices, offsets, include_last_offset):
    """(starts, ends) of the bags, as int64 arrays, after checking ``offsets``."""
    if indices.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{OP}: offsets must be None for a 2-D input (each row is a "
                             f"bag), got {type(offsets).__name__}")
        # As in PyTorch, include_last_offset does not apply to a 2-D input.
        n_bags, length = indices.shape
        starts = xp.arange(n_bags, dtype=np.int64) * length
        return starts, starts + length
    if offsets is None:
        raise ValueError(f"{OP}: offsets are required for a 1-D input (they mark where "
                         f"each bag starts)")
    offs = int_array("offsets", offsets)
    if offs.ndim != 1 or offs.shape[0] == 0:
        raise ValueError(f"{OP}: offsets must be a non-empty 1-D array, got shape {offs.shape}")
    offs = xp.asarray(offs).astype(np.int64)
    first, last, length = int(offs[0]), int(offs[-1]), indices.shape[0]
    if first != 0:
        raise ValueError(f"{OP}: offsets[0] must be 0 (the first bag starts the input), "
                         f"got {first}")
    if offs.shape[0] > 1 and bool((offs[1:] < offs[:-1]).any()):
        raise ValueError(f"{OP}: offsets must be non-decreasing, got {offs.tolist()}")
    if last > length:
        raise ValueError(f"{OP}: offsets[-1] is {last}, beyond the input's length {length}")
    if include_last_offset:
        if offs.shape[0] < 2:
            raise ValueError(f"{OP}: with include_last_offset=True, offsets need at least 2 "
                             f"entries (bag starts and the end), got {offs.shape[0]}")
        return offs[:-1], offs[1:]
    return offs, xp.concatenate([offs[1:], xp.asarray([length], dtype=np.int64)])


def make_bags(xp, indices, starts, ends, padding_idx, num):
    flat = indices.reshape(-1)
    sizes = ends - starts
    total = int(ends[-1]) if ends.shape[0] else 0
    pos = xp.arange(total)
    seg = xp.searchsorted(ends, pos, side="right")          # the bag of each entry
    if padding_idx is not None:
        keep = flat[:total] != padding_idx
        pos, seg = pos[keep], seg[keep]
    idx = flat[pos]
    sizes = xp.bincount(seg, minlength=sizes.shape[0]) if seg.size else xp.zeros_like(sizes)
    return Bags(idx, seg, pos, sizes.astype(np.int64), num, indices.shape)


def check_options(mode, include_last_offset, scale_grad_by_freq, sparse, max_norm,
                   norm_type):
    """The scalar arguments; returns (max_norm, norm_type) as floats (or None)."""
    if not isinstance(mode, str):
        raise TypeError(f"{OP}: mode must be a str, got {type(mode).__name__}")
    if mode not in MODES:
        raise ValueError(f"{OP}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    check_bool(OP, "include_last_offset", include_last_offset)
    check_bool(OP, "scale_grad_by_freq", scale_grad_by_freq)
    if check_bool(OP, "sparse", sparse):
        raise ValueError(f"{OP}: sparse=True is not supported (gradients are dense)")
    if scale_grad_by_freq and mode == "max":
        raise ValueError(f"{OP}: scale_grad_by_freq is not supported with mode='max'")
    if max_norm is None:
        return None, norm_type
    max_norm = check_real(OP, "max_norm", max_norm)
    norm_type = check_real(OP, "norm_type", norm_type)
    if max_norm <= 0 or norm_type <= 0:
        raise ValueError(f"{OP}: max_norm and norm_type must be positive, got "
                         f"{max_norm} and {norm_type}")
    return max_norm, norm_type


def check_per_sample_weights(psw, mode, indices, w):
    if psw is None:
        return
    psw = check_float_array(OP, "per_sample_weights", psw)
    if mode != "sum":
        raise ValueError(f"{OP}: per_sample_weights are only supported with mode='sum', "
                         f"got mode={mode!r}")
    if psw.shape != indices.shape:
        raise ValueError(f"{OP}: per_sample_weights must have the input's shape "
                         f"{indices.shape}, got {psw.shape}")
    if psw.dtype != w.dtype:
        raise TypeError(f"{OP}: per_sample_weights must have the weight's dtype "
                        f"{w.dtype}, got {psw.dtype}")


def check_tables(input, weight):
    """The index array (1-D or 2-D integers) and the weight (2-D float)."""
    indices = check_array(OP, "input", input)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{OP}: input must hold integer indices, got dtype {indices.dtype}")
    if indices.ndim not in (1, 2):
        raise ValueError(f"{OP}: input must be 1-D (with offsets) or 2-D (bags, length), "
                         f"got shape {indices.shape}")
    w = check_float_array(OP, "weight", weight)
    if w.ndim != 2:
        raise ValueError(f"{OP}: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {w.shape}")
    return indices, w
