"""Numba kernels for layer normalization (and RMS normalization) over the last axis.

The input is seen as R rows of D values.  Each row is short enough to stay in cache, so
the kernels read it a few times from cache but from memory once:

* forward: mean and variance of the row (two passes over the cached row, which keeps the
  variance accurate; the sums in x's dtype, as PyTorch's), then
  ``y = (x - mean) * rstd * weight + bias`` in one write;
* backward: per row, the two means ``mean(g)`` and ``mean(g * xhat)`` (g = gy * weight)
  with ``xhat`` recomputed from x and the saved (mean, rstd) instead of stored, then
  ``gx = rstd * (g - mean(g) - xhat * mean(g * xhat))``; ``gweight`` and ``gbias``
  accumulate over blocks of ``FOLD_ROWS`` rows in x's dtype, the blocks in float64.

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
    return (y.reshape(x.shape).astype(x.dtype, copy=False), mean.astype(x.dtype),
            rstd.astype(x.dtype))


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


# fastmath without "nnan"/"ninf": a NaN or inf row must give NaN (as PyTorch), which LLVM
# may not assume away; "reassoc" is what lets the row sums vectorise.  error_model numpy:
# 1 / sqrt(0) is inf (a constant row with eps=0), never a ZeroDivisionError.
_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}


@jit(cache=True, fastmath=_FLAGS, error_model="numpy")
def _forward(x, weight, bias, eps, center, y, mean, rstd):
    rows, d = x.shape
    zero = y.dtype.type(0)
    for i in range(rows):
        # The row sums accumulate in x's dtype, as PyTorch's float32 layer norm does: in
        # vector lanes (fastmath), so a 128-value row is 16 sums of 8 (float64 sums are
        # slower: docs/performance.md).  The variance is still the two-pass one:
        # squares of the centred values, not E[x^2] - mean^2.
        total = zero
        if center:
            for j in range(d):
                total += x[i, j]
        # Stored in x's dtype and read back, so the element loops stay in that dtype.
        mean[i] = total / d
        mu = mean[i]
        sq = zero
        for j in range(d):
            c = x[i, j] - mu
            sq += c * c
        rstd[i] = 1 / np.sqrt(sq / d + eps)
        r = rstd[i]
        for j in range(d):
            y[i, j] = (x[i, j] - mu) * r * weight[j] + bias[j]


FOLD_ROWS = 64     # rows whose weight/bias gradients sum in x's dtype before float64


@jit(cache=True, fastmath=_FLAGS, error_model="numpy")
def _backward(x, gy, weight, mean, rstd, center, gx, gweight, gbias, part_w, part_b):
    rows, d = x.shape
    dtype = gx.dtype.type
    zero = dtype(0)
    for i in range(rows):
        mu = mean[i]
        r = rstd[i]
        sum_g = zero
        sum_gx = zero
        for j in range(d):
            xh = (x[i, j] - mu) * r
            g = gy[i, j] * weight[j]
            sum_g += g
            sum_gx += g * xh
            part_w[j] += gy[i, j] * xh
            part_b[j] += gy[i, j]
        mean_g = dtype(sum_g / d) if center else zero        # x's dtype (see _forward)
        mean_gx = dtype(sum_gx / d)
        for j in range(d):
            xh = (x[i, j] - mu) * r
            gx[i, j] = r * (gy[i, j] * weight[j] - mean_g - xh * mean_gx)
        # The weight and bias gradients sum over every row: a block of rows in x's
        # dtype (vector adds, twice as fast as float64 throughout), then folded into the
        # float64 totals, so long batches lose no precision.
        if (i + 1) % FOLD_ROWS == 0 or i == rows - 1:
            for j in range(d):
                gweight[j] += part_w[j]
                gbias[j] += part_b[j]
                part_w[j] = zero
                part_b[j] = zero


def _rows(a, d):
    return np.ascontiguousarray(a).reshape(-1, d)


def _check(where, x, weight, bias=None, gy=None, stats=(None, None)):
    """What the kernels rely on (they index without bounds checks): x a float32/float64
    NumPy array of rows of ``d = weight.size`` values (d > 0); ``bias`` with d values;
    ``gy`` of x's shape; the saved ``stats`` (mean, rstd) one entry per row; all floating
    NumPy arrays.  Returns d."""
    if not isinstance(x, np.ndarray) or x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{where}: x must be a float32 or float64 NumPy array, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    if not isinstance(weight, np.ndarray) or weight.dtype.kind != "f":
        raise TypeError(f"{where}: weight must be a floating NumPy array, got "
                        f"{getattr(weight, 'dtype', type(weight).__name__)}")
    d = weight.size
    if d == 0 or x.size % d:
        raise ValueError(f"{where}: x of shape {x.shape} must be rows of weight.size = {d} "
                         "values (weight non-empty)")
    rows = x.size // d
    wants = [("bias", bias, d, "size"),
             ("gy", gy, x.shape, "shape"), ("mean", stats[0], (rows,), "shape"),
             ("rstd", stats[1], (rows,), "shape")]
    for name, a, want, attr in wants:
        if a is None:
            continue
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            raise TypeError(f"{where}: {name} must be a floating NumPy array, got "
                            f"{getattr(a, 'dtype', type(a).__name__)}")
        if getattr(a, attr) != want:
            raise ValueError(f"{where}: {name} must have {attr} {want} for x of shape "
                             f"{x.shape} ({d} values per row), got shape {a.shape}")
    return d


def layer_norm_numba(x, weight, bias, eps, center=True):
    """Normalise the last ``weight.size`` values of x: returns (y, mean, rstd), the last two
    with one entry per row.  ``weight``/``bias`` are 1-D (ones/zeros when absent)."""
    d = _check("layer_norm_numba", x, weight, bias=bias)
    x2 = _rows(x, d)
    y = np.empty(x2.shape, x.dtype)
    mean = np.empty(x2.shape[0], x.dtype)
    rstd = np.empty(x2.shape[0], x.dtype)
    _forward(x2, weight.reshape(-1), bias.reshape(-1), float(eps), center, y, mean, rstd)
    return y.reshape(x.shape), mean, rstd


def layer_norm_grad_numba(x, gy, weight, mean, rstd, center=True):
    """(gx, gweight, gbias) from the saved per-row mean and rstd."""
    d = _check("layer_norm_grad_numba", x, weight, gy=gy, stats=(mean, rstd))
    x2 = _rows(x, d)
    gx = np.empty(x2.shape, x.dtype)
    gweight = np.zeros(d, np.float64)
    gbias = np.zeros(d, np.float64)
    _backward(x2, _rows(gy, d), weight.reshape(-1), mean, rstd, center, gx, gweight, gbias,
              np.zeros(d, x.dtype), np.zeros(d, x.dtype))
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
