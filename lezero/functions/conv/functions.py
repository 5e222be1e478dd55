"""The autograd Functions of convolution: three products that differentiate into each other.

The forward pass and the two gradients are the three partial derivatives of one trilinear
form, ``<conv(x, w), gy>``, so

    Conv            (x, w)  -> y    backward: ConvGradInput(gy, w), ConvGradWeight(x, gy)
    ConvGradInput   (gy, w) -> gx   backward: Conv(ggx, w), ConvGradWeight(ggx, gy)
    ConvGradWeight  (x, gy) -> gw   backward: ConvGradInput(gy, ggw), Conv(x, ggw)

and every backward is again made of these Functions: any order of derivative works, and
each product runs with the fastest algorithm for its shape.  ``ConvGradInput`` is also the
transposed convolution.  ``Unfold`` and ``Fold`` (im2col and col2im) are each other's
adjoints.
"""
import numpy as np

from lezero.core import Function
from lezero.kernels import argcheck
from lezero.functions.common import xp_of
from lezero.functions.conv import select
from lezero.functions.conv.algorithm import is_fixed
from lezero.functions.conv.geometry import ConvProblem, check_fits
from lezero.functions.conv.im2col import col2im, im2col
from lezero.functions.conv.parallel import drop_backward_entries, run_product
from lezero.functions.reduction import sum as _sum


_DTYPE_NAMES = {}      # dtype.name is surprisingly slow; it is asked on every call


def problem(geom, batch, in_channels, out_channels, array, fixed_weight=False):
    """The ConvProblem for arrays like ``array`` (its dtype and backend)."""
    if isinstance(array, np.ndarray):
        backend = "numpy"
    else:                               # a device: its backend's name ("cupy", "strict", ...)
        from lezero.backends import get_backend
        backend = get_backend(array).name
    name = _DTYPE_NAMES.get(array.dtype)
    if name is None:
        name = _DTYPE_NAMES[array.dtype] = array.dtype.name
    return ConvProblem(geom, int(batch), int(in_channels), int(out_channels), name, backend,
                       fixed_weight)


def forward_product(geom, algo, x, w, cache):
    """``(conv(x, w), the algorithm that ran)`` on raw arrays of ``geom``: the work of
    ``Conv``'s forward, also run without a graph node by inference fusion."""
    check_fits("conv", geom, x=x, w=w)
    prob = problem(geom, x.shape[0], x.shape[1], w.shape[0], x, is_fixed(w))
    chosen = select.choose(prob, "forward", algo)
    return run_product(chosen, "forward", x, w, prob, cache), chosen


def _add_bias(y, b):
    if b is not None:
        y += b.reshape((1, -1) + (1,) * (y.ndim - 2))
    return y


def _bias_grad(f, gy, index):
    """The gradient of a bias added over axis 1 (None when there is no bias input)."""
    if len(f.inputs) <= index or not f.needs_input_grad[index]:
        return None
    return _sum(gy, axis=(0,) + tuple(range(2, gy.ndim)))


class Conv(Function):
    """``y = conv(x, w) + b`` with the algorithm ``algo`` ("auto" chooses per shape)."""

    reads_outputs = False

    def __init__(self, geom, algo="auto"):
        self.geom = geom
        self.algo = algo
        self.cache = {}

    def forward(self, x, w, b=None):
        # keep transforms of x only if the weight will want its gradient
        self.cache["keep_input"] = bool(self.needs_input_grad) and self.needs_input_grad[1]
        y, self.chosen = forward_product(self.geom, self.algo, x, w, self.cache)
        return _add_bias(y, b)

    def backward(self, gy):
        x, w = self.inputs[:2]
        gx = gw = None
        fwd = self.chosen.name        # its cached transforms make it cheaper to keep
        if self.needs_input_grad[0]:
            gx = ConvGradInput(self.geom, self.algo, self.cache, fwd)(gy, w)
        if self.needs_input_grad[1]:
            gw = ConvGradWeight(self.geom, self.algo, self.cache, fwd)(x, gy)
        drop_backward_entries(self.cache)      # this backward only; kept transforms too
        if len(self.inputs) == 3:
            return gx, gw, _bias_grad(self, gy, 2)
        return gx, gw


class ConvGradInput(Function):
    """``gx = conv_transpose(gy, w) + b``: the adjoint of ``Conv`` in its input."""

    reads_outputs = False

    def __init__(self, geom, algo="auto", cache=None, prefer=None):
        self.geom = geom
        self.algo = algo
        self.cache = {} if cache is None else cache
        self.prefer = prefer

    def forward(self, gy, w, b=None):
        check_fits("conv_transpose", self.geom, w=w, y=gy)
        prob = problem(self.geom, gy.shape[0], w.shape[1] * self.geom.groups, w.shape[0], gy)
        self.chosen = select.choose(prob, "grad_input", self.algo, self.prefer)
        return _add_bias(run_product(self.chosen, "grad_input", gy, w, prob, self.cache), b)

    def backward(self, ggx):
        gy, w = self.inputs[:2]
        g_gy = g_w = None
        if self.needs_input_grad[0]:
            g_gy = Conv(self.geom, self.algo)(ggx, w)
        if self.needs_input_grad[1]:
            g_w = ConvGradWeight(self.geom, self.algo)(ggx, gy)
        if len(self.inputs) == 3:
            return g_gy, g_w, _bias_grad(self, ggx, 2)
        return g_gy, g_w


class ConvGradWeight(Function):
    """``gw``: the adjoint of ``Conv`` in its weight, from ``x`` and ``gy``."""

    reads_outputs = False

    def __init__(self, geom, algo="auto", cache=None, prefer=None):
        self.geom = geom
        self.algo = algo
        self.cache = {} if cache is None else cache
        self.prefer = prefer

    def forward(self, x, gy):
        check_fits("conv_grad_weight", self.geom, x=x, y=gy)
        prob = problem(self.geom, x.shape[0], x.shape[1], gy.shape[1], x)
        self.chosen = select.choose(prob, "grad_weight", self.algo, self.prefer)
        return run_product(self.chosen, "grad_weight", x, gy, prob, self.cache)

    def backward(self, ggw):
        x, gy = self.inputs
        g_x = g_gy = None
        if self.needs_input_grad[0]:
            g_x = ConvGradInput(self.geom, self.algo)(gy, ggw)
        if self.needs_input_grad[1]:
            g_gy = Conv(self.geom, self.algo)(x, ggw)
        return g_x, g_gy


class Unfold(Function):
    """im2col: ``(N, C, *spatial) -> (N, C * K, L)``, as ``torch.nn.functional.unfold``."""

    def __init__(self, geom):
        self.geom = geom

    def forward(self, x):
        check_fits("unfold", self.geom, x=x)
        xp = xp_of(x)
        n, c = x.shape[:2]
        out = xp.empty((n, c * self.geom.kernel_volume, self.geom.out_volume), dtype=x.dtype)
        im2col(x, self.geom, out=out.transpose(1, 0, 2))
        return out

    def backward(self, gcol):
        return Fold(self.geom, self.inputs[0].shape)(gcol)


class Fold(Function):
    """col2im: ``(N, C * K, L) -> (N, C, *spatial)``, summing overlapping patches."""

    def __init__(self, geom, x_shape):
        self.geom = geom
        self.x_shape = tuple(x_shape)

    def forward(self, col):
        shape = argcheck.ints("fold", "output shape", self.x_shape, self.geom.nd + 2, low=0)
        check_fits("fold", self.geom, x=_Shape(shape))
        n, c = shape[:2]
        expected = (n, c * self.geom.kernel_volume, self.geom.out_volume)
        if col.shape != expected:
            raise ValueError(f"fold: columns of shape {col.shape} do not fit an output of "
                             f"shape {self.x_shape}: expected {expected}")
        return col2im(col.transpose(1, 0, 2), self.geom, self.x_shape, col.dtype)

    def backward(self, gx):
        return Unfold(self.geom)(gx)


class _Shape:
    """A shape standing in for an array in ``check_fits`` (Fold's output is not made yet)."""

    def __init__(self, shape):
        self.shape, self.ndim = shape, len(shape)


__all__ = ["Conv", "ConvGradInput", "ConvGradWeight", "Unfold", "Fold", "problem",
           "forward_product"]
