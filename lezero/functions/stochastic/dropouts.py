"""Stochastic regularisers: dropout, dropout1d/2d/3d, alpha_dropout (``torch.nn.functional``
names).

``training=None`` (the default) follows ``lz.Config.train``, so ``lz.test_mode()`` (or
``Module.eval()``) turns them into the identity.  Masks come from the process generator
(``lezero.core.random.get_rng``), so ``lz.manual_seed`` reproduces them.

Each is one Function, ``y = x * scale + shift`` with constant arrays drawn in forward:
its gradient is ``gy * scale`` (the mask times 1/(1-p) for dropout), and it is linear,
so double backward is trivially right.
"""
import math

import numpy as np

from lezero.core import Function, Variable, get_config
from lezero.random import get_rng
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.registry import register
from lezero.utils.checks import check_bool, check_float_array, check_real, check_training

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout"]

# alpha_dropout's saturation value: -SELU's scale * alpha (PyTorch's constant).
ALPHA_PRIME = 1.7580993408473766


class ScaleShift(Function):
    """y = x * scale (+ shift): constant arrays broadcast against x (also used by rrelu).

    ``scale`` may be a bool mask with ``factor`` its value where True (dropout's kept
    mask).  After forward a host mask of ``PACK_MIN`` elements or more is held for
    backward packed eight to a byte (``np.packbits``: an eighth of a bool mask, a
    thirty-second of float32), and unpacked when backward needs it; not while a trace
    records (``lz.jit`` reads the mask itself)."""

    save_inputs, reads_outputs = (), False
    bits = None             # the packed mask, when forward packed it

    def __init__(self, scale, shift=None, factor=None):
        self.scale = scale
        self.shift = shift
        self.factor = factor

    def forward(self, x):
        y = x * self.scale
        if self.factor is not None:
            y *= x.dtype.type(self.factor)
            self._pack()
        return y if self.shift is None else y + self.shift

    def _pack(self):
        m = self.scale
        if (type(m) is np.ndarray and m.dtype == np.bool_ and m.size >= PACK_MIN
                and not get_config().tracing):
            self.bits, self.mask_shape, self.scale = np.packbits(m, axis=None), m.shape, None

    def mask(self):
        """The scale (the bool mask, unpacked if forward packed it)."""
        if self.bits is None:
            return self.scale
        size = math.prod(self.mask_shape)
        return np.unpackbits(self.bits, count=size).view(np.bool_).reshape(self.mask_shape)

    def backward(self, gy):
        scale = self.mask()
        if self.factor is not None:
            scale = scale * gy.dtype.type(self.factor)      # bool mask * factor, gy's dtype
        return gy * as_variable(scale)


PACK_MIN = 1 << 12          # elements from which a kept dropout mask is bit-packed


def _keep_mask(arr, p, shape):
    """True where an element (or channel) is kept (probability 1 - p)."""
    return get_rng(xp_of(arr)).random(shape, dtype="float32") >= p


def check_probability(op, p):
    """A dropout probability in [0, 1] as a Python float."""
    p = check_real(op, "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability p must be in [0, 1], got {p}")
    return p


def _apply(op, x, p, training, draw):
    """Check the arguments, then: the identity when not training or p == 0; zeros when
    p == 1 (as PyTorch, avoiding 0/0 in scales); else ``x * scale + shift`` with
    ``(scale, shift) = draw(array, p)``."""
    arr = check_float_array(op, "input", x)
    p = check_probability(op, p)
    if not check_training(op, training) or p == 0:
        return x if isinstance(x, Variable) else as_variable(x)
    if p == 1:
        return ScaleShift(xp_of(arr).zeros((1,) * arr.ndim, arr.dtype))(x)
    return ScaleShift(*draw(arr, p))(x)


def _inverted_dropout(arr, p):
    return _keep_mask(arr, p, arr.shape), None, 1 / (1 - p)


def _channel_dropout(lead):
    """A draw that zeroes whole channels: one mask value per index of the first ``lead``
    axes ((sample, channel) when batched, channel alone when not), shared by the rest."""
    def draw(arr, p):
        channels = arr.shape[:lead] + (1,) * (arr.ndim - lead)
        return _keep_mask(arr, p, channels), None, 1 / (1 - p)
    return draw


def _feature_dropout(op, input, p, training, layouts):
    """Channel dropout for the ranks in ``layouts``: {ndim: (lead axes, "(N, C, ...)")}.
    Any other rank is a ValueError listing the accepted layouts."""
    ndim = check_float_array(op, "input", input).ndim
    if ndim not in layouts:
        accepted = " or ".join(f"{n}-D {text}" for n, (_, text) in sorted(layouts.items()))
        raise ValueError(f"{op}: input must be {accepted}, got {ndim}-D with shape "
                         f"{data_of(input).shape}")
    return _apply(op, input, p, training, _channel_dropout(layouts[ndim][0]))


def _alpha_dropout(arr, p):
    # Kept: a * x + a * alpha' * p.  Dropped: a * alpha' * (p - 1), i.e. the saturation
    # value -alpha' sent through the same affine map; a = ((1 - p)(1 + p alpha'^2))^(-1/2)
    # brings the variance back to one.
    keep = _keep_mask(arr, p, arr.shape).astype(arr.dtype)
    a = ((1 - p) * (1 + p * ALPHA_PRIME ** 2)) ** -0.5
    return keep * a, (keep - 1 + p) * (a * ALPHA_PRIME)


@register("stochastic")
def dropout(input, p=0.5, training=None):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p)."""
    return _apply("dropout", input, p, training, _inverted_dropout)


@register("stochastic")
def dropout1d(input, p=0.5, training=None, inplace=False):
    """Zero whole channels of (N, C, L) (or of unbatched (C, L)) with probability ``p``;
    scale the rest by 1 / (1 - p).  ``inplace`` is accepted for PyTorch compatibility and
    has no effect (a new Variable is always returned)."""
    check_bool("dropout1d", "inplace", inplace)
    return _feature_dropout("dropout1d", input, p, training,
                            {2: (1, "(C, L)"), 3: (2, "(N, C, L)")})


@register("stochastic")
def dropout2d(input, p=0.5, training=None):
    """Zero whole channels ``input[n, c]`` with probability ``p``; scale the rest by
    1 / (1 - p).  Input is (N, C, H, W), or (N, C, L) treated channel-wise as PyTorch
    currently does."""
    return _feature_dropout("dropout2d", input, p, training,
                            {3: (2, "(N, C, L)"), 4: (2, "(N, C, H, W)")})


@register("stochastic")
def dropout3d(input, p=0.5, training=None, inplace=False):
    """Zero whole channels of (N, C, D, H, W) (or of unbatched (C, D, H, W)) with
    probability ``p``; scale the rest by 1 / (1 - p).  ``inplace`` is accepted for PyTorch
    compatibility and has no effect (a new Variable is always returned)."""
    check_bool("dropout3d", "inplace", inplace)
    return _feature_dropout("dropout3d", input, p, training,
                            {4: (1, "(C, D, H, W)"), 5: (2, "(N, C, D, H, W)")})


@register("stochastic")
def alpha_dropout(input, p=0.5, training=None):
    """Dropout for SELU networks: dropped entries take SELU's saturation value and an
    affine map restores zero mean and unit variance (for inputs that have them).

    Unlike PyTorch, whose ``alpha_dropout`` defaults to ``training=False``, the default
    ``None`` follows ``lz.Config.train`` like the other dropouts.
    """
    return _apply("alpha_dropout", input, p, training, _alpha_dropout)
