"""Weight initialisers with PyTorch's names, defaults and fan conventions.

Each takes a Parameter (or Variable, or array) and fills it in place from LeZero's process
generator (``lz.manual_seed`` reproduces them); it returns its argument.
"""
import math

import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.core import get_rng


def _array(t):
    return t.data if isinstance(t, Variable) else t


def _fill(t, values):
    arr = _array(t)
    xp = cuda.get_array_module(arr)
    arr[...] = xp.asarray(values, dtype=arr.dtype)
    return t


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(t):
    shape = _array(t).shape
    if len(shape) < 2:
        raise ValueError(f"fan in/out needs at least 2 dims, got shape {shape}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _fan(t, mode):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


def uniform_(t, a=0.0, b=1.0):
    return _fill(t, get_rng().uniform(a, b, _array(t).shape))


def normal_(t, mean=0.0, std=1.0):
    return _fill(t, get_rng().normal(mean, std, _array(t).shape))


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal values redrawn until they fall in [a, b]."""
    shape = _array(t).shape
    out = get_rng().normal(mean, std, shape)
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = get_rng().normal(mean, std, int(bad.sum()))
        bad = (out < a) | (out > b)
    return _fill(t, out)


def constant_(t, val):
    _array(t)[...] = val
    return t


def zeros_(t):
    return constant_(t, 0)


def ones_(t):
    return constant_(t, 1)


def xavier_uniform_(t, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / _fan(t, mode))
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode)))


def orthogonal_(t, gain=1.0):
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one."""
    shape = _array(t).shape
    rows, cols = shape[0], int(np.prod(shape[1:]))
    flat = get_rng().standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, gain * q.reshape(shape))
