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
temporaries (``layer_norm_ref`` and ``layer_norm_grad_ref`` below; the general array path
of ``lezero.functions.normalization.fused.Normalize`` is the same arithmetic).  The
kernels (``layer_norm_numba``, ``layer_norm_grad_numba``) are serial and run only on NumPy
arrays; ``layer_norm`` and ``layer_norm_grad`` dispatch.
"""
import numpy as np

from lezero.kernels import enabled, jit

__all__ = ["layer_norm", "layer_norm_grad", "layer_norm_ref", "layer_norm_grad_ref",
           "layer_norm_numba", "layer_norm_grad_numba"]


# ----- NumPy references ---------------------------------------------------------------------

def _xp(a):
    from lezero.cuda import get_array_module
    return get_array_module(a)


def layer_norm_ref(x, weight, bias, eps, center=True):
    """(y, mean, rstd) over the last ``weight.size`` values of x, mean and rstd with one
    entry per row (mean 0 without ``center``: RMS norm)."""
    d = weight.size
    x2 = x.reshape(-1, d)
    mean = x2.mean(axis=1) if center else _xp(x).zeros(x2.shape[0], x.dtype)
    xc = x2 - mean[:, None]
    rstd = 1 / (((xc * xc).mean(axis=1) + x.dtype.type(eps)) ** 0.5)
    y = xc * rstd[:, None] * weight.reshape(-1) + bias.reshape(-1)
    return y.reshape(x.shape).astype(x.dtype, copy=False), mean.astype(x.dtype), rstd.astype(x.dtype)


def layer_norm_grad_ref(x, gy, weight, mean, rstd, center=True):
    """(gx, gweight, gbias) from the saved per-row mean and rstd."""
    d = weight.size
    x2, g2 = x.reshape(-1, d), gy.reshape(-1, d)
    xhat = (x2 - mean[:, None]) * rstd[:, None]
    g = g2 * weight.reshape(-1)
    mean_gx = (g * xhat).mean(axis=1, keepdims=True)
    mean_g = g.mean(axis=1, keepdims=True) if center else 0
    gx = rstd[:, None] * (g - mean_g - xhat * mean_gx)
    gweight = (g2 * xhat).sum(axis=0).reshape(weight.shape)
    gbias = g2.sum(axis=0).reshape(weight.shape)
    return gx.reshape(x.shape), gweight.astype(x.dtype), gbias.astype(x.dtype)


# ----- Numba kernels ------------------------------------------------------------------------


@jit(cache=True, fastmath=True)
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


@jit(cache=True, fastmath=True)
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


def layer_norm_numba(x, weight, bias, eps, center=True):
    """Normalise the last ``weight.size`` values of x: returns (y, mean, rstd), the last two
    with one entry per row.  ``weight``/``bias`` are 1-D (ones/zeros when absent)."""
    d = weight.size
    x2 = _rows(x, d)
    y = np.empty(x2.shape, x.dtype)
    mean = np.empty(x2.shape[0], x.dtype)
    rstd = np.empty(x2.shape[0], x.dtype)
    _forward(x2, weight.reshape(-1), bias.reshape(-1), float(eps), center, y, mean, rstd)
    return y.reshape(x.shape), mean, rstd


def layer_norm_grad_numba(x, gy, weight, mean, rstd, center=True):
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


# ----- dispatch ---------------------------------------------------------------------------------

def layer_norm(x, weight, bias, eps, center=True):
    """The kernel for NumPy arrays where ``enabled``, else the reference."""
    fn = layer_norm_numba if enabled(x) else layer_norm_ref
    return fn(x, weight, bias, eps, center)


def layer_norm_grad(x, gy, weight, mean, rstd, center=True):
    """The kernel for NumPy arrays where ``enabled``, else the reference."""
    fn = layer_norm_grad_numba if enabled(x, gy) else layer_norm_grad_ref
    return fn(x, gy, weight, mean, rstd, center)
