"""Numba kernels for batch normalization with the batch's statistics (training mode).

The input (N, C, ...) is seen as (N, C, L): one channel's statistics cover N runs of L
contiguous values.  The kernels work channel by channel, so one channel's values (N * L,
a few hundred KB at ResNet's sizes) are read from memory once and again from cache:

* forward: the channel's mean, then the variance of the centred values (two passes, the
  sums in float64), then ``y = x * a + b`` with ``a = rstd * weight`` and
  ``b = bias - mean * a``: three passes in all, one of them a write;
* backward: ``sum(gy)`` and ``sum(gy * xhat)`` with ``xhat`` recomputed from x and the
  saved (mean, rstd), then ``gx = rstd * weight * (gy - mean(gy) - xhat * mean(gy * xhat))``;
  ``gweight`` and ``gbias`` are those two sums.

NumPy needs about fifteen full-size passes and as many temporaries for the same
(``batch_norm_ref``, ``batch_norm_grad_ref``; ``functions.normalization.fused.Normalize``'s
array path is the same arithmetic).  The channels are cut into ranges run on the
runtime's threads (``run_ranges``).  ``zero_var_rstd``: with ``eps == 0`` a constant
channel gets rstd 0 (PyTorch's batch norm), not inf.
"""
import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.runtime import policy, run_ranges

__all__ = ["batch_norm", "batch_norm_grad", "batch_norm_ref", "batch_norm_grad_ref",
           "usable"]

_DTYPES = (np.float32, np.float64)


def usable(x):
    """True when the kernels run for ``x``: a C-contiguous float32/float64 NumPy array of
    at least three dims with Numba on."""
    return (type(x) is np.ndarray and x.ndim >= 3 and x.dtype in _DTYPES and x.size > 0
            and x.flags.c_contiguous and enabled(x))


# ----- NumPy references ---------------------------------------------------------------------

def batch_norm_ref(x, weight, bias, eps, zero_var_rstd=False):
    """(y, mean, var, rstd) of ``x`` (N, C, ...) over every axis but 1; statistics (C,)."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes)
    xc = x - mean.reshape(shape)
    var = (xc * xc).mean(axis=axes)
    with np.errstate(divide="ignore"):
        rstd = 1 / np.sqrt(var + x.dtype.type(eps))
    if zero_var_rstd and eps == 0:
        rstd[var == 0] = 0
    y = xc * (rstd * weight).reshape(shape) + bias.reshape(shape)
    return y.astype(x.dtype, copy=False), mean, var, rstd


def batch_norm_grad_ref(x, gy, weight, mean, rstd):
    """(gx, gweight, gbias) from the saved per-channel mean and rstd."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    count = x.size // x.shape[1]
    xhat = (x - mean.reshape(shape)) * rstd.reshape(shape)
    gb = gy.sum(axis=axes)
    gw = (gy * xhat).sum(axis=axes)
    gx = (rstd * weight).reshape(shape) * (gy - (gb / count).reshape(shape)
                                           - xhat * (gw / count).reshape(shape))
    return gx.astype(x.dtype, copy=False), gw.astype(x.dtype), gb.astype(x.dtype)


# ----- Numba kernels ------------------------------------------------------------------------

# "reassoc" lets the sums vectorise; no "nnan"/"ninf": a NaN input must give NaN.
_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}


@jit(cache=True, fastmath=_FLAGS, error_model="numpy", nogil=True)
def _forward(x, weight, bias, eps, zero_var, y, mean, var, rstd, lo, hi):
    n, _, length = x.shape
    count = n * length
    for c in range(lo, hi):
        total = 0.0
        for i in range(n):
            for j in range(length):
                total += x[i, c, j]
        m = total / count
        sq = 0.0
        for i in range(n):
            for j in range(length):
                d = x[i, c, j] - m
                sq += d * d
        v = sq / count
        r = 0.0 if zero_var and v == 0.0 else 1.0 / np.sqrt(v + eps)
        mean[c], var[c], rstd[c] = m, v, r
        a = r * weight[c]
        b = bias[c] - m * a
        for i in range(n):
            for j in range(length):
                y[i, c, j] = x[i, c, j] * a + b


@jit(cache=True, fastmath=_FLAGS, error_model="numpy", nogil=True)
def _backward(x, gy, weight, mean, rstd, need_gx, gx, gweight, gbias, lo, hi):
    n, _, length = x.shape
    count = n * length
    for c in range(lo, hi):
        m, r = np.float64(mean[c]), np.float64(rstd[c])
        sg = 0.0
        sgx = 0.0
        for i in range(n):
            for j in range(length):
                g = gy[i, c, j]
                sg += g
                sgx += g * ((x[i, c, j] - m) * r)
        gbias[c], gweight[c] = sg, sgx
        if need_gx:
            k = r * weight[c]
            mg, mgx = sg / count, sgx / count
            for i in range(n):
                for j in range(length):
                    gx[i, c, j] = k * (gy[i, c, j] - mg - (x[i, c, j] - m) * r * mgx)


def _view(x):
    return x.reshape(x.shape[0], x.shape[1], -1)


def _check(op, x, params, gy=None):
    if not usable(x):
        raise ValueError(f"{op}: x must be a C-contiguous float32/float64 NumPy array of "
                         f"3 or more dims, got {getattr(x, 'shape', None)} "
                         f"{getattr(x, 'dtype', type(x))}")
    c = x.shape[1]
    argcheck.arrays(op, **params)
    for name, p in params.items():
        argcheck.shape_is(op, name, p, (c,))
    if gy is not None:
        argcheck.arrays(op, gy=gy)
        if gy.shape != x.shape or gy.dtype != x.dtype or not gy.flags.c_contiguous:
            raise ValueError(f"{op}: gy must be C-contiguous {x.dtype} of shape {x.shape}, "
                             f"got {gy.shape} {gy.dtype}")


def batch_norm(x, weight, bias, eps, zero_var_rstd=False):
    """(y, mean, var, rstd) as ``batch_norm_ref``, on the Numba kernel (``usable(x)``);
    ``weight`` and ``bias`` (C,) arrays (ones and zeros for absent ones)."""
    _check("batch_norm", x, {"weight": weight, "bias": bias})
    c = x.shape[1]
    xv = _view(x)
    y = np.empty_like(xv)
    stats = [np.empty(c, np.float64) for _ in range(3)]
    w, b = weight.astype(np.float64), bias.astype(np.float64)
    run_ranges(lambda lo, hi: _forward(xv, w, b, float(eps), bool(zero_var_rstd and eps == 0),
                                       y, *stats, lo, hi), c, x.size, policy.min_part_items)
    mean, var, rstd = (s.astype(x.dtype) for s in stats)
    return y.reshape(x.shape), mean, var, rstd


def batch_norm_grad(x, gy, weight, mean, rstd, need_gx=True):
    """(gx or None, gweight, gbias) as ``batch_norm_grad_ref``, on the Numba kernel."""
    _check("batch_norm_grad", x, {"weight": weight, "mean": mean, "rstd": rstd}, gy)
    c = x.shape[1]
    xv, gv = _view(x), _view(gy)
    gx = np.empty_like(xv) if need_gx else np.empty((1, c, 1), x.dtype)
    gw, gb = np.empty(c, np.float64), np.empty(c, np.float64)
    w = weight.astype(np.float64)
    run_ranges(lambda lo, hi: _backward(xv, gv, w, mean, rstd, bool(need_gx), gx, gw, gb,
                                        lo, hi), c, x.size, policy.min_part_items)
    return (gx.reshape(x.shape) if need_gx else None), gw.astype(x.dtype), gb.astype(x.dtype)
