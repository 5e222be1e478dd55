"""Joining, splitting and rearranging: concatenate, stack, split, chunk, tile, repeat,
flip, roll, pad.

``concatenate`` and ``split`` are each other's gradients; ``flip`` and ``roll`` are undone
by themselves; ``tile``, ``repeat`` and the non-constant ``pad`` modes are built from
``broadcast_to`` and integer indexing, whose gradients sum the copies back.
"""
import numpy as np

from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.registry import register
from lezero.functions.shape.index import GetItem, _select, to_backend
from lezero.functions.shape.views import (axis_tuple, broadcast_to, expand_dims,
                                          reshape)
from lezero.kernels.join import adjacent_join
from lezero.utils.checks import check_array, check_axis, is_int

__all__ = ["concatenate", "stack", "split", "chunk", "tile", "repeat", "flip", "roll", "pad"]


def _check_sequence(op, xs):
    """The arrays of a non-empty list/tuple of Variables or arrays."""
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of arrays, got {type(xs).__name__}")
    if not xs:
        raise ValueError(f"{op}: need at least one array, got an empty sequence")
    return [check_array(op, f"xs[{i}]", x) for i, x in enumerate(xs)]


class Concatenate(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, *xs):
        self.bounds = np.cumsum([x.shape[self.axis] for x in xs[:-1]]).tolist()
        return xp_of(*xs).concatenate(xs, axis=self.axis)

    def backward(self, gy):
        gxs = Split(self.bounds, self.axis)(gy)
        return tuple(gxs) if isinstance(gxs, list) else gxs


class Split(Function):
    """Cut ``x`` along ``axis`` at ``bounds`` (sorted offsets that tile the axis)."""

    def __init__(self, bounds, axis):
        self.bounds = bounds
        self.axis = axis

    def forward(self, x):
        return tuple(xp_of(x).split(x, self.bounds, axis=self.axis))

    def backward(self, *gys):
        # An output nobody used arrives as zeros (the engine fills it), so the pieces
        # always tile the input again.
        return Concatenate(self.axis)(*gys)

    def backward_arrays(self, *gys):
        """First order: the pieces joined back, as a view when they lie side by side in
        one buffer (``lezero.kernels.join``), else a copy."""
        joined = adjacent_join(list(gys), self.axis)
        return joined if joined is not None else xp_of(*gys).concatenate(gys, axis=self.axis)


@register("shape")
def concatenate(xs, axis=0):
    """Join arrays along an existing ``axis``, as ``numpy.concatenate``; all other axes
    must match."""
    arrs = _check_sequence("concatenate", xs)
    ndim = arrs[0].ndim
    if ndim == 0:
        raise ValueError("concatenate: 0-d arrays cannot be concatenated")
    axis = check_axis("concatenate", axis, ndim, zero_dim=False)
    ref = arrs[0].shape
    for i, a in enumerate(arrs):
        if a.ndim != ndim or a.shape[:axis] + a.shape[axis + 1:] != ref[:axis] + ref[axis + 1:]:
            raise ValueError(f"concatenate: xs[{i}] has shape {a.shape}, which does not match "
                             f"xs[0]'s shape {ref} outside axis {axis}")
    return Concatenate(axis)(*xs)


@register("shape")
def stack(xs, axis=0):
    """Join same-shaped arrays along a new ``axis``, as ``numpy.stack``."""
    arrs = _check_sequence("stack", xs)
    for i, a in enumerate(arrs):
        if a.shape != arrs[0].shape:
            raise ValueError(f"stack: xs[{i}] has shape {a.shape} but xs[0] has shape "
                             f"{arrs[0].shape}; all must be equal")
    axis = check_axis("stack", axis, arrs[0].ndim + 1, zero_dim=False)
    return Concatenate(axis)(*[expand_dims(x, axis) for x in xs])


def _split_at(x, bounds, axis):
    ys = Split(bounds, axis)(x)
    return ys if isinstance(ys, list) else [ys]


@register("shape")
def split(x, indices_or_sections, axis=0):
    """Split ``x`` along ``axis`` into a list of Variables, as ``numpy.split``.

    An int ``N`` makes N equal pieces (an error when the axis does not divide evenly); a
    sequence of offsets cuts there (offsets past the end give empty pieces).  Offsets must
    be non-decreasing, so the pieces tile ``x`` and their gradients join back.
    """
    arr = check_array("split", "x", x)
    if arr.ndim == 0:
        raise ValueError("split: x must have at least 1 dim, got a 0-d array")
    axis = check_axis("split", axis, arr.ndim, zero_dim=False)
    n = arr.shape[axis]
    if is_int(indices_or_sections):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(f"split: the number of sections must be positive, got {sections}")
        if n % sections:
            raise ValueError(f"split: an axis of length {n} does not divide into {sections} "
                             "equal sections")
        bounds = [n // sections * i for i in range(1, sections)]
    elif isinstance(indices_or_sections, (list, tuple)) and all(
            is_int(b) for b in indices_or_sections):
        bounds = [min(max(int(b) + n, 0) if b < 0 else int(b), n) for b in indices_or_sections]
        if any(b1 > b2 for b1, b2 in zip(bounds, bounds[1:])):
            raise ValueError(f"split: offsets {list(indices_or_sections)} must be "
                             "non-decreasing")
    else:
        raise TypeError(f"split: indices_or_sections must be an int or a list of ints, got "
                        f"{indices_or_sections!r}")
    return _split_at(x, bounds, axis)


@register("shape")
def chunk(x, chunks, axis=0):
    """Split ``x`` into at most ``chunks`` pieces of ``ceil(n / chunks)`` along ``axis``
    (the last may be smaller, and there may be fewer pieces), as ``torch.chunk``."""
    arr = check_array("chunk", "x", x)
    if arr.ndim == 0:
        raise ValueError("chunk: x must have at least 1 dim, got a 0-d array")
    if not is_int(chunks):
        raise TypeError(f"chunk: chunks must be an int, got {type(chunks).__name__}")
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    axis = check_axis("chunk", axis, arr.ndim, zero_dim=False)
    n = arr.shape[axis]
    size = -(-n // int(chunks))
    return _split_at(x, list(range(size, n, size)) if size else [], axis)


@register("shape")
def tile(x, reps):
    """Repeat the whole of ``x`` ``reps`` times along each axis, as ``numpy.tile``.

    Built as reshape -> broadcast_to -> reshape: each axis of length s becomes (r, s),
    the r copies are a broadcast, and the gradient sums them.
    """
    arr = check_array("tile", "x", x)
    reps = (reps,) if is_int(reps) else reps
    if not isinstance(reps, (tuple, list)) or not all(is_int(r) for r in reps):
        raise TypeError(f"tile: reps must be an int or a tuple of ints, got {reps!r}")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {tuple(reps)}")
    d = max(len(reps), arr.ndim)
    reps = (1,) * (d - len(reps)) + tuple(int(r) for r in reps)
    shape = (1,) * (d - arr.ndim) + arr.shape
    y = reshape(x, tuple(v for s in shape for v in (1, s)))
    y = broadcast_to(y, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return reshape(y, tuple(r * s for r, s in zip(reps, shape)))


@register("shape")
def repeat(x, repeats, axis=None):
    """Repeat each element ``repeats`` times along ``axis`` (of the flattened ``x`` when
    None), as ``numpy.repeat``; ``repeats`` is an int or one count per element.

    One count for all is a broadcast of a new axis; per-element counts are an integer
    gather.  Either way the gradient sums each element's copies.
    """
    arr = check_array("repeat", "x", x)
    if axis is None:
        x, shape, axis = reshape(x, (-1,)), (arr.size,), 0
    else:
        if arr.ndim == 0:
            raise ValueError("repeat: axis must be None for a 0-d array")
        axis, shape = check_axis("repeat", axis, arr.ndim, zero_dim=False), arr.shape
    n = shape[axis]
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1:
        raise TypeError(f"repeat: repeats must be an int or a 1-D sequence of ints, "
                        f"got {repeats!r}")
    if counts.size not in (1, n):
        raise ValueError(f"repeat: got {counts.size} repeat counts for an axis of length {n}")
    if (counts < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative, got {repeats!r}")
    if counts.size == 1:
        r = int(counts.reshape(-1)[0])
        y = broadcast_to(expand_dims(x, axis + 1), shape[:axis + 1] + (r,) + shape[axis + 1:])
        return reshape(y, shape[:axis] + (n * r,) + shape[axis + 1:])
    idx = np.repeat(np.arange(n), counts)
    return _select(x, to_backend(xp_of(arr), (idx,))[0], axis)


class Flip(Function):
    def __init__(self, axes):
        self.axes = axes

    def forward(self, x):
        return x[tuple(slice(None, None, -1) if d in self.axes else slice(None)
                       for d in range(x.ndim))]

    def backward(self, gy):
        return Flip(self.axes)(gy)


@register("shape")
def flip(x, axis=None):
    """Reverse the order of elements along ``axis`` (all axes when None), as
    ``numpy.flip``."""
    ndim = check_array("flip", "x", x).ndim
    axes = tuple(range(ndim)) if axis is None else axis_tuple("flip", axis, ndim)
    return Flip(axes)(x)


class Roll(Function):
    def __init__(self, shift, axis):
        self.shift = shift
        self.axis = axis

    def forward(self, x):
        return xp_of(x).roll(x, self.shift, self.axis)

    def backward(self, gy):
        back = -self.shift if isinstance(self.shift, int) else tuple(-s for s in self.shift)
        return Roll(back, self.axis)(gy)


@register("shape")
def roll(x, shift, axis=None):
    """Shift elements cyclically by ``shift`` along ``axis``, as ``numpy.roll``; with
    ``axis=None`` the flattened array is rolled (``shift`` must then be an int)."""
    ndim = check_array("roll", "x", x).ndim
    shifts = (shift,) if is_int(shift) else shift
    if not isinstance(shifts, (tuple, list)) or not all(is_int(s) for s in shifts):
        raise TypeError(f"roll: shift must be an int or a tuple of ints, got {shift!r}")
    if axis is None:
        if len(shifts) != 1:
            raise ValueError(f"roll: shift must be a single int when axis is None, got {shift!r}")
        return Roll(int(shifts[0]), None)(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(check_axis("roll", a, ndim, zero_dim=False) for a in axes)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift!r} and axis {axis!r} have different lengths")
    return Roll(tuple(int(s) for s in shifts), axes)(x)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge",
              "replicate": "edge", "wrap": "wrap", "circular": "wrap", "symmetric": "symmetric"}


class ConstantPad(Function):
    def __init__(self, widths, value):
        self.widths = widths
        self.value = value

    def forward(self, x):
        self.x_shape = x.shape
        return xp_of(x).pad(x, self.widths, mode="constant", constant_values=self.value)

    def backward(self, gy):
        return GetItem(tuple(slice(b, b + n) for (b, _), n in zip(self.widths, self.x_shape)))(gy)


def _pad_widths(pad_width, ndim):
    """NumPy's pad_width forms (int, (b, a), ((b0, a0), (b1, a1), ...)) as per-axis pairs."""
    try:
        w = np.asarray(pad_width)
    except ValueError:
        w = np.asarray(0.5)     # ragged: reported as a kind error below
    if w.dtype.kind not in "iu":
        raise TypeError(f"pad: pad_width must be ints, got {pad_width!r}")
    if (w < 0).any():
        raise ValueError(f"pad: pad_width must be non-negative, got {pad_width!r}")
    try:
        w = np.broadcast_to(w, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width!r} does not fit an input with {ndim} "
                         "dims") from None
    return tuple((int(b), int(a)) for b, a in w)


@register("shape")
def pad(x, pad_width, mode="constant", constant_values=0):
    """Pad ``x`` with NumPy's ``pad_width`` (``((before, after), ...)`` per axis, or one
    pair / one int for all axes).

    Modes: ``constant`` (fill with ``constant_values``), ``reflect`` (mirror without the
    edge), ``symmetric`` (mirror with the edge), ``edge`` (alias ``replicate``) and
    ``wrap`` (alias ``circular``).  The non-constant modes copy existing elements, so they
    are integer gathers along each padded axis and their gradients scatter-add.
    """
    arr = check_array("pad", "x", x)
    widths = _pad_widths(pad_width, arr.ndim)
    if not isinstance(mode, str):
        raise TypeError(f"pad: mode must be a str, got {type(mode).__name__}")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: unknown mode {mode!r}; expected one of {sorted(_PAD_MODES)}")
    if mode == "constant" or not any(b or a for b, a in widths):
        if isinstance(constant_values, bool) or not isinstance(constant_values,
                                                               (int, float, np.number)):
            raise TypeError(f"pad: constant_values must be a number, got {constant_values!r}")
        return ConstantPad(widths, constant_values)(x)
    xp = xp_of(arr)
    for axis, (b, a) in enumerate(widths):
        if not (b or a):
            continue
        if arr.shape[axis] == 0:
            raise ValueError(f"pad: cannot pad an empty axis {axis} in mode {mode!r}")
        idx = np.pad(np.arange(arr.shape[axis]), (b, a), mode=_PAD_MODES[mode])
        x = _select(x, to_backend(xp, (idx,))[0], axis)
    return x
