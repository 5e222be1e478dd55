"""Numba kernels for layer normalization (and RMS normalization) over the last axis.

The input is seen as R rows of D values.  Each row is short enough to stay in cache, so
the kernels read it a few times from cache but from memory once:

* forward: mean and variance of the row (two passes over the cached row, which keeps the
  variance accurate), then ``y = (x - mean) * rstd * weight + bias`` in one write;
* backward: per row, the two means ``mean(g)`` and ``mean(g * xhat)`` (g = gy * weight)
  with ``xhat`` recomputed from x and the saved (mean, rstd) instead of stored, then
  ``gx = rstd * (g - mean(g) - xhat * mean(g * xhat))``; ``gweight`` and ``gbias``
  accumulate over rows in float64.

NumPy does the same work in about fifteen passes over full-size arrays with as many
temporaries (``lezero.functions.normalization.fused.Normalize``, the reference the tests
compare against).  The kernels are serial, run only on NumPy arrays when
``lezero.kernels.enabled`` says so, and are compiled with ``cache=True``.
"""
import numba
import numpy as np


@numba.njit(cache=True, fastmath=True)
def _forward(x, weight, bias, eps, center, y, mean, rstd):
    rows, d = x.shape
    for i in range(rows):
        # Sums accumulate in float64; storing into mean/rstd (x's dtype) and reading back
        # gives the row constants in x's dtype, so the element loops stay in float32.
        total = 0.0
        if center:
            for j in range(d):
                total += x[i, j]
        mean[i] = total / d
        mu = mean[i]
        sq = 0.0
        for j in range(d):
            c = x[i, j] - mu
            sq += c * c
        rstd[i] = 1.0 / np.sqrt(sq / d + eps)
        r = rstd[i]
        for j in range(d):
            y[i, j] = (x[i, j] - mu) * r * weight[j] + bias[j]


@numba.njit(cache=True, fastmath=True)
def _backward(x, gy, weight, mean, rstd, center, gx, gweight, gbias, scratch):
    rows, d = x.shape
    for i in range(rows):
        mu = mean[i]
        r = rstd[i]
        sum_g = 0.0
        sum_gx = 0.0
        for j in range(d):
            xh = (x[i, j] - mu) * r
            g = gy[i, j] * weight[j]
            sum_g += g
            sum_gx += g * xh
            gweight[j] += gy[i, j] * xh
            gbias[j] += gy[i, j]
        scratch[0] = sum_g / d if center else 0.0      # cast to x's dtype (see _forward)
        scratch[1] = sum_gx / d
        mean_g = scratch[0]
        mean_gx = scratch[1]
        for j in range(d):
            xh = (x[i, j] - mu) * r
            gx[i, j] = r * (gy[i, j] * weight[j] - mean_g - xh * mean_gx)


def _rows(a, d):
    return np.ascontiguousarray(a).reshape(-1, d)


def layer_norm_forward(x, weight, bias, eps, center=True):
    """Normalise the last ``weight.size`` values of x: returns (y, mean, rstd), the last two
    with one entry per row.  ``weight``/``bias`` are 1-D (ones/zeros when absent)."""
    d = weight.size
    x2 = _rows(x, d)
    y = np.empty(x2.shape, x.dtype)
    mean = np.empty(x2.shape[0], x.dtype)
    rstd = np.empty(x2.shape[0], x.dtype)
    _forward(x2, weight.reshape(-1), bias.reshape(-1), float(eps), center, y, mean, rstd)
    return y.reshape(x.shape), mean, rstd


def layer_norm_backward(x, gy, weight, mean, rstd, center=True):
    """(gx, gweight, gbias) from the saved per-row mean and rstd."""
    d = weight.size
    x2 = _rows(x, d)
    gx = np.empty(x2.shape, x.dtype)
    gweight = np.zeros(d, np.float64)
    gbias = np.zeros(d, np.float64)
    _backward(x2, _rows(gy, d), weight.reshape(-1), mean, rstd, center, gx, gweight, gbias,
              np.empty(2, x.dtype))
    return (gx.reshape(x.shape), gweight.astype(x.dtype).reshape(weight.shape),
            gbias.astype(x.dtype).reshape(weight.shape))
