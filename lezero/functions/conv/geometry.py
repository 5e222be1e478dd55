"""Convolution geometry: argument parsing and output sizes, shared by every conv operator.

A convolution maps ``x (N, Cin, *in_size)`` to ``y (N, Cout, *out_size)`` with a weight
``(Cout, Cin / groups, *kernel)``:

    y[n, o, i] = sum_{c, p} w[o, c, p] * x[n, c, i * stride + p * dilation - pad_lo]

``ConvGeometry`` holds the static part (everything but batch and channels).  The transposed
convolution, ``unfold`` and ``fold`` reuse it: a transposed convolution *is* the gradient of
the convolution whose output is its input, so it is described by that convolution's geometry.
"""
import dataclasses
import math

import numpy as np

from lezero.kernels import argcheck
from lezero.utils.checks import check_int, ntuple


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
    """Spatial geometry of one convolution (all tuples have one entry per spatial dim)."""
    in_size: tuple
    out_size: tuple
    kernel: tuple
    stride: tuple
    pad_lo: tuple
    pad_hi: tuple
    dilation: tuple
    groups: int = 1

    @property
    def nd(self):
        return len(self.kernel)

    @property
    def kernel_volume(self):
        return math.prod(self.kernel)

    @property
    def out_volume(self):
        return math.prod(self.out_size)

    def as_3d(self):
        """The 15 ints the 3-D im2col kernels take: kernel, stride, pad_lo, dilation and
        output size, with leading spatial dims of size one added."""
        lead = 3 - self.nd
        one, zero = (1,) * lead, (0,) * lead
        return (one + self.kernel + one + self.stride + zero + self.pad_lo
                + one + self.dilation + one + self.out_size)

    def is_winograd_3x3(self):
        """3x3 kernel, stride 1, dilation 1, one group: the case Winograd handles."""
        return (self.nd == 2 and self.kernel == (3, 3) and self.stride == (1, 1)
                and self.dilation == (1, 1) and self.groups == 1)

    def describe(self):
        """Short human-readable form, e.g. ``k3x3 s1x1 p1,1/1,1 d1x1 g1``."""
        j = "x".join
        return (f"k{j(map(str, self.kernel))} s{j(map(str, self.stride))} "
                f"p{','.join(map(str, self.pad_lo))}/{','.join(map(str, self.pad_hi))} "
                f"d{j(map(str, self.dilation))} g{self.groups}")


@dataclasses.dataclass(frozen=True)
class ConvProblem:
    """A geometry with batch, channels, dtype and backend: what an algorithm is run on.
    ``fixed_weight``: the weight was declared fixed (``algorithm.declare_fixed``), so a
    transform of it made once is kept from call to call and costs a forward nothing."""
    geom: ConvGeometry
    batch: int
    in_channels: int
    out_channels: int
    dtype: str = "float32"
    backend: str = "numpy"
    fixed_weight: bool = False

    @property
    def x_shape(self):
        return (self.batch, self.in_channels) + self.geom.in_size

    @property
    def y_shape(self):
        return (self.batch, self.out_channels) + self.geom.out_size

    @property
    def w_shape(self):
        return (self.out_channels, self.in_channels // self.geom.groups) + self.geom.kernel

    @property
    def itemsize(self):
        return np.dtype(self.dtype).itemsize

    def flops(self):
        """Multiply-adds x 2 of the direct forward convolution (also each gradient's)."""
        g = self.geom
        return (2 * self.batch * self.out_channels * (self.in_channels // g.groups)
                * g.kernel_volume * g.out_volume)


_CHECKED = {}       # id -> geometry that passed check_fits' geometry checks
_TUPLES = ("in_size", "out_size", "kernel", "stride", "pad_lo", "pad_hi", "dilation")


def check_fits(op, geom, x=None, w=None, y=None):
    """ValueError (TypeError for a malformed geometry) unless ``geom`` is a consistent
    geometry and the arrays given fit it: input-side ``x`` (N, C, *in_size), weight ``w``
    (O, C / groups, *kernel), output-side ``y`` (N, O, *out_size).  The Functions check
    this on every call: one replayed on other arrays, or rebuilt from a file, must not hand
    the kernels a geometry that is not theirs.  Metadata only."""
    nd = len(geom.kernel)
    if _CHECKED.get(id(geom)) is not geom:      # a frozen geometry is checked once
        argcheck.ints(op, "input size", geom.in_size, nd, low=0)
        argcheck.windows(op, geom.in_size, geom.out_size, geom.kernel, geom.stride,
                         geom.pad_lo, geom.dilation)
        argcheck.ints(op, "groups", (geom.groups,), 1, low=1)
        if len(_CHECKED) >= 4096:
            _CHECKED.clear()
        if all(type(getattr(geom, f)) is tuple for f in _TUPLES):  # nothing mutable
            _CHECKED[id(geom)] = geom           # (kept alive: its id is not reused)
    groups = geom.groups
    for name, a, size in (("x", x, geom.in_size), ("w", w, geom.kernel),
                          ("y", y, geom.out_size)):
        if a is not None and (a.ndim != nd + 2 or a.shape[2:] != tuple(size)):
            raise ValueError(f"{op}: {name} of shape {a.shape} does not fit the geometry "
                             f"{geom.describe()}: expected (N, C, "
                             f"{', '.join(map(str, size))})")
    xc, yc = (None if a is None else a.shape[1] for a in (x, y))
    if w is not None:
        bad = w.shape[0] % groups or xc not in (None, w.shape[1] * groups) \
            or yc not in (None, w.shape[0])
    else:
        bad = any(c is not None and c % groups for c in (xc, yc))
    if bad:
        raise ValueError(f"{op}: channels do not agree: x {_shape(x)}, weight {_shape(w)} "
                         f"and y {_shape(y)} with groups={groups}")
    if x is not None and y is not None and x.shape[0] != y.shape[0]:
        raise ValueError(f"{op}: x {x.shape} and y {y.shape} have different batch sizes")


def _shape(a):
    return None if a is None else a.shape


# ----- argument parsing -------------------------------------------------------------------

def parse_padding(op, padding, nd, kernel, stride, dilation):
    """``padding`` as (lo, hi) tuples: an int, a tuple, ``"valid"`` or ``"same"``.

    ``"same"`` (stride 1 only, as in PyTorch) pads ``dilation * (k - 1)`` in total, the odd
    pixel going to the high side."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided "
                                 f"convolutions (stride={stride})")
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            lo = tuple(t // 2 for t in total)
            return lo, tuple(t - l for t, l in zip(total, lo))
        raise ValueError(f"{op}: padding must be an int, a tuple, 'same' or 'valid', "
                         f"got {padding!r}")
    pad = ntuple(op, "padding", padding, nd, low=0)
    return pad, pad


def out_size(in_size, kernel, stride, pad_lo, pad_hi, dilation):
    """Output size per dim: floor((in + lo + hi - dilation*(k-1) - 1) / stride) + 1."""
    return tuple((i + lo + hi - d * (k - 1) - 1) // s + 1 for i, k, s, lo, hi, d
                 in zip(in_size, kernel, stride, pad_lo, pad_hi, dilation))


_GEOMETRIES = {}        # validated geometries by their (typed, hashable) arguments


def _typed(value):
    """``value`` with the type of each part, so that ``True`` and ``1`` differ."""
    if type(value) is tuple:
        return tuple((type(v), v) for v in value)
    return type(value), value


def conv_geometry(op, x_shape, w_shape, nd, stride, padding, dilation, groups):
    """Validate a convolution's arguments (shapes already checked) -> ConvGeometry.  A
    model calls its layers with the same arguments every step: the checks run once per
    distinct call, and later calls take the frozen result from a table."""
    try:
        key = (op, tuple(x_shape), tuple(w_shape), nd) + tuple(
            _typed(v) for v in (stride, padding, dilation, groups))
        hit = _GEOMETRIES.get(key)
    except TypeError:           # an unhashable argument (a list): no table
        key = hit = None
    if hit is None:
        hit = _conv_geometry(op, x_shape, w_shape, nd, stride, padding, dilation, groups)
        if key is not None and len(_GEOMETRIES) < 4096:
            _GEOMETRIES[key] = hit
    return hit


def _conv_geometry(op, x_shape, w_shape, nd, stride, padding, dilation, groups):
    groups = check_int(op, "groups", groups, low=1)
    kernel = tuple(int(k) for k in w_shape[2:])
    stride = ntuple(op, "stride", stride, nd, low=1)
    dilation = ntuple(op, "dilation", dilation, nd, low=1)
    lo, hi = parse_padding(op, padding, nd, kernel, stride, dilation)
    in_size = tuple(int(s) for s in x_shape[2:])
    for i in range(nd):
        span = dilation[i] * (kernel[i] - 1) + 1
        if in_size[i] + lo[i] + hi[i] < span:
            raise ValueError(f"{op}: the (dilated) kernel size {span} is larger than the padded "
                             f"input size {in_size[i] + lo[i] + hi[i]} in spatial dim {i} "
                             f"(input shape {tuple(x_shape)}, weight shape {tuple(w_shape)})")
    out = out_size(in_size, kernel, stride, lo, hi, dilation)
    return ConvGeometry(in_size, out, kernel, stride, lo, hi, dilation, int(groups))


def conv_transpose_geometry(op, x_shape, w_shape, nd, stride, padding, output_padding,
                            groups, dilation):
    """The geometry of the convolution whose input-gradient a transposed convolution is.

    Output size: (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
    """
    groups = check_int(op, "groups", groups, low=1)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be an int or a tuple of {nd} ints, got "
                         f"{padding!r} (strings are for convolutions only)")
    kernel = tuple(int(k) for k in w_shape[2:])
    stride = ntuple(op, "stride", stride, nd, low=1)
    dilation = ntuple(op, "dilation", dilation, nd, low=1)
    pad = ntuple(op, "padding", padding, nd, low=0)
    opad = ntuple(op, "output_padding", output_padding, nd, low=0)
    for i in range(nd):
        if opad[i] >= max(stride[i], dilation[i]):
            raise ValueError(f"{op}: output_padding must be smaller than either stride or "
                             f"dilation, got output_padding={opad}, stride={stride}, "
                             f"dilation={dilation}")
    y_size = tuple(int(s) for s in x_shape[2:])
    in_size = tuple((y - 1) * s - 2 * p + d * (k - 1) + o + 1 for y, s, p, d, k, o
                    in zip(y_size, stride, pad, dilation, kernel, opad))
    if any(s < 1 for s in in_size):
        raise ValueError(f"{op}: the output size {in_size} would not be positive (input shape "
                         f"{tuple(x_shape)}, weight {tuple(w_shape)}, stride {stride}, "
                         f"padding {pad})")
    return ConvGeometry(in_size, y_size, kernel, stride, pad, pad, dilation, int(groups))
