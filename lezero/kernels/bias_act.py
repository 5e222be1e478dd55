"""A convolution's bias and a clamp activation (ReLU, ReLU6) added in place, in one pass.

Inference fusion (``lezero.nn.inference_fusion``) runs Conv2d + BatchNorm2d + ReLU/ReLU6
as one convolution with folded weights; what is left after the product is
``y = clamp(y + bias[c], lo, hi)`` on every (n, c) plane of the fresh output.  NumPy does
that in two passes (a broadcast add, then ``clip``, itself slow for scalar bounds); the
kernel reads and writes each value once.  NaN stays NaN (``lo``/``hi`` are applied as
selects that a NaN fails, as ``np.clip`` and PyTorch's clamp keep it).  Planes are cut
over the runtime's threads (``run_ranges``) when the output is large.

``bias_act_ref`` is the NumPy (and CuPy) reference, ``bias_act_numba`` the kernel
(C-contiguous float32/float64 NumPy arrays), ``bias_act_`` dispatches.
"""
import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.runtime import policy, run_ranges

__all__ = ["bias_act_", "bias_act_ref", "bias_act_numba"]


def bias_act_ref(y, bias, lo=-np.inf, hi=np.inf):
    """``y`` (N, C, ...) with ``bias`` (C,) or None added over axis 1, then clamped to
    [lo, hi] (NaN kept), in place; returns ``y``."""
    from lezero.cuda import get_array_module
    xp = get_array_module(y)
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * (y.ndim - 2))
    if lo > -np.inf:
        xp.maximum(y, y.dtype.type(lo), out=y)
    if hi < np.inf:
        xp.minimum(y, y.dtype.type(hi), out=y)
    return y


@jit(cache=True, nogil=True, error_model="numpy")
def _planes(y, bias, lo, hi, p0, p1):
    channels = bias.size
    for p in range(p0, p1):
        b = bias[p % channels]
        row = y[p]
        for j in range(row.size):
            v = row[j] + b
            v = lo if v < lo else v          # selects: NaN fails both, stays NaN
            row[j] = hi if v > hi else v


def bias_act_numba(y, bias, lo=-np.inf, hi=np.inf):
    """``bias_act_ref`` as one Numba pass over ``y`` (bias None: zeros)."""
    op = "bias_act_numba"
    argcheck.arrays(op, y=y)
    if y.dtype not in (np.float32, np.float64):
        raise TypeError(f"{op}: y must be float32 or float64, got {y.dtype}")
    argcheck.c_contiguous(op, "y", y)
    if y.ndim < 2:
        raise ValueError(f"{op}: y must be (N, C, ...), got shape {y.shape}")
    c = y.shape[1]
    b = np.zeros(c, y.dtype) if bias is None else np.asarray(bias, y.dtype)
    argcheck.shape_is(op, "bias", b, (c,))
    if not lo <= hi:
        raise ValueError(f"{op}: lo must not exceed hi, got [{lo}, {hi}]")
    planes = y.reshape(y.shape[0] * c, -1)
    t = y.dtype.type
    run_ranges(lambda p0, p1: _planes(planes, b, t(lo), t(hi), p0, p1), planes.shape[0],
               y.size, policy.cheap_min_part_items)
    return y


def bias_act_(y, bias, lo=-np.inf, hi=np.inf):
    """Dispatch: the kernel for C-contiguous float32/float64 NumPy arrays, else the
    reference."""
    if (enabled(y) and y.dtype in (np.float32, np.float64) and y.flags.c_contiguous
            and y.ndim >= 2 and y.size and (bias is None or type(bias) is np.ndarray)):
        return bias_act_numba(y, bias, lo, hi)
    return bias_act_ref(y, bias, lo, hi)
