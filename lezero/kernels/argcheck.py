"""What a kernel relies on, checked before it runs.

A Numba kernel indexes without bounds checks: an array shorter than the loop that reads
it, a geometry that does not fit its input or an unsigned index that wrapped reads or
writes memory the kernel does not own.  So the Python function that calls a kernel (its
``<op>_numba`` wrapper, or the driver that builds its arguments) checks every shape,
length, index range and geometry the kernel uses, with the helpers below, and raises
before the kernel runs: ``TypeError`` for the wrong kind of argument (not an array, a
dtype the kernel was not written for, a geometry entry that is not an int),
``ValueError`` for a wrong value (a shape, a length, a geometry that does not fit).  Every
message starts with the wrapper's name and says what it got.

Each check reads metadata only (shapes, dtypes, flags, a handful of ints): a few hundred
nanoseconds per call, nothing that grows with the data.  Index arrays whose range matters
are checked by the kernels themselves, in the loop that reads them (a separate min/max
pass would cost a fifth of a scatter).
"""
import numpy as np

__all__ = ["arrays", "shape_is", "same_shape", "ndim_is", "dtype_is", "floats", "ints",
           "c_contiguous", "windows", "tap_ranges", "GEOMETRY_LIMIT"]

# A stride, padding, dilation or size beyond this belongs to no array that fits in memory;
# refusing it keeps the kernels' index arithmetic far from int64 overflow.
GEOMETRY_LIMIT = 1 << 31


def arrays(op, **named):
    """TypeError unless every value is a NumPy array (the kernels take nothing else)."""
    for name, a in named.items():
        if type(a) is not np.ndarray:
            raise TypeError(f"{op}: {name} must be a NumPy array, got {type(a).__name__}")


def shape_is(op, name, a, shape):
    """ValueError unless ``a.shape == shape``."""
    if a.shape != tuple(shape):
        raise ValueError(f"{op}: {name} must have shape {tuple(shape)}, got {a.shape}")


def same_shape(op, first, a, second, b):
    """ValueError unless the arrays named ``first`` and ``second`` have one shape."""
    if a.shape != b.shape:
        raise ValueError(f"{op}: {first} and {second} must have the same shape, got "
                         f"{a.shape} and {b.shape}")


def ndim_is(op, name, a, *ndims):
    """ValueError unless ``a.ndim`` is one of ``ndims``."""
    if a.ndim not in ndims:
        wanted = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"{op}: {name} must be {wanted}, got shape {a.shape}")


def dtype_is(op, name, a, *dtypes):
    """TypeError unless ``a.dtype`` is one of ``dtypes``."""
    if a.dtype not in dtypes:
        wanted = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(f"{op}: {name} must be {wanted}, got dtype {a.dtype}")


def floats(op, name, a):
    """TypeError unless ``a`` holds floats."""
    if a.dtype.kind != "f":
        raise TypeError(f"{op}: {name} must hold floats, got dtype {a.dtype}")


def c_contiguous(op, name, a):
    """ValueError unless ``a`` is C-contiguous (the kernel views it as flat rows)."""
    if not a.flags.c_contiguous:
        raise ValueError(f"{op}: {name} must be C-contiguous, got strides {a.strides} for "
                         f"shape {a.shape}")


_INT = {int}


def ints(op, name, values, n, low=None):
    """``values`` as a tuple of ``n`` Python ints, each in [low, GEOMETRY_LIMIT)."""
    try:
        items = tuple(values)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a sequence of {n} ints, got "
                        f"{type(values).__name__}") from None
    if len(items) != n:
        raise ValueError(f"{op}: {name} must hold {n} ints, got {len(items)}: {items}")
    if set(map(type, items)) - _INT:          # the common case, plain ints, costs one set
        for v in items:
            if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{op}: {name} must hold ints, got {type(v).__name__} {v!r}")
        items = tuple(int(v) for v in items)
    floor = -GEOMETRY_LIMIT if low is None else low
    if items and (min(items) < floor or max(items) >= GEOMETRY_LIMIT):
        raise ValueError(f"{op}: {name} must hold ints in [{floor}, {GEOMETRY_LIMIT}), "
                         f"got {items}")
    return items


def windows(op, in_size, out_size, kernel, stride, pad, dilation, inside=False):
    """ValueError unless the output grid fits the input: kernel, stride and dilation at
    least 1, padding at least 0, and every output's window starting inside the input
    padded by ``pad`` on both sides (true of every convolution, transposed convolution
    and pooling geometry, ceil mode and "same" padding included).  With ``inside``, also
    unless every window has a tap inside the input itself (what pooling needs: a window
    of padding alone has no maximum and no mean).  Returns the five tuples as ints."""
    n = len(in_size)
    geometry = _plain_geometry(n, kernel, stride, dilation, pad, out_size)
    if geometry is None:            # not plain ints in range: find which, and say so
        geometry = (ints(op, "kernel size", kernel, n, low=1),
                    ints(op, "stride", stride, n, low=1),
                    ints(op, "dilation", dilation, n, low=1),
                    ints(op, "padding", pad, n, low=0),
                    ints(op, "output size", out_size, n, low=0))
    kernel, stride, dilation, pad, out_size = geometry
    for i in range(n):
        last = (out_size[i] - 1) * stride[i] - pad[i]
        if out_size[i] and last > in_size[i] - 1 + pad[i]:
            raise ValueError(_misfit(op, in_size, out_size, kernel, stride, pad, dilation,
                                     f"the last window of axis {i} would start past the "
                                     "padded input"))
        if inside:
            _, lo, hi = tap_ranges(in_size[i], out_size[i], kernel[i], stride[i], pad[i],
                                   dilation[i])
            if (lo >= hi).any():
                raise ValueError(_misfit(op, in_size, out_size, kernel, stride, pad, dilation,
                                         f"a window of axis {i} has no tap inside the input"))
    return kernel, stride, pad, dilation, out_size


def _plain_geometry(n, *groups):
    """The five tuples when each holds ``n`` plain ints in range (kernel, stride and
    dilation at least 1, padding and output size at least 0); else None.  One pass over
    all of them: the checks of every convolution and pooling call run this."""
    try:
        groups = tuple(tuple(g) for g in groups)
    except TypeError:
        return None
    flat = sum(groups, ())
    if len(flat) != 5 * n or set(map(type, flat)) - _INT or not flat:
        return None
    if min(flat[:3 * n]) < 1 or min(flat[3 * n:]) < 0 or max(flat) >= GEOMETRY_LIMIT:
        return None
    return groups


def _misfit(op, in_size, out_size, kernel, stride, pad, dilation, why):
    return (f"{op}: output size {out_size} does not fit input size {tuple(in_size)} with "
            f"kernel {kernel}, stride {stride}, padding {pad} and dilation {dilation}: {why}")


def tap_ranges(size, out, k, s, p, d):
    """For one spatial axis: per output, the window's start and the range [lo, hi) of its
    kernel taps that fall inside the input (taps in the padding are skipped); vectorised,
    O(out)."""
    start = np.arange(out, dtype=np.int64) * s - p
    lo = np.where(start < 0, (-start + d - 1) // d, 0)
    hi = np.minimum(k, (size - 1 - start) // d + 1)
    return start, lo, hi
