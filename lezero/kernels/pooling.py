"""Max pooling with argmax indices: ``max_pool_ref`` (NumPy/CuPy), the 2-D Numba kernel
``max_pool2d_numba`` and the dispatcher ``max_pool``, which falls back to the reference
whenever ``lezero.kernels.enabled`` says no (CuPy arrays, ``Config.use_numba = False``,
no Numba).  Its backward, ``scatter_add_rows``, is the scatter-add kernel of
``lezero.kernels.scatter``.

Layout: ``x`` is ``(R, H, W)`` with ``R = N * C`` rows; indices are flat positions
``h * W + w`` into one row, as PyTorch's ``return_indices`` gives them.  3-D pooling
(``(R, D, H, W)``, indices ``(d * H + h) * W + w``) runs on the NumPy/CuPy reference.
Ties go to the first maximum in window order (row-major over the kernel), and a NaN
wins over numbers (the last NaN in window order), which is what PyTorch's CPU kernel does.
"""
import itertools

import numpy as np

from lezero.kernels import enabled, jit
from lezero.kernels.scatter import scatter_add_


# ----- NumPy references (also the CuPy path: only slicing and elementwise ops) ----------

def _window_rows(size, out, k, s, p, d, xp):
    """For one spatial axis: ``pos[o, kk]`` input coordinate of kernel tap ``kk`` of output
    ``o``, and whether it lies inside the input (taps in the padding are skipped)."""
    pos = xp.arange(out)[:, None] * s - p + xp.arange(k)[None, :] * d
    return pos, (pos >= 0) & (pos < size)


def max_pool_ref(x, kernel, stride, padding, dilation, out_size):
    """Max pooling of ``x`` (R, *spatial) over its spatial axes (two or three) ->
    (values (R, *out_size), int64 flat indices (R, *out_size)).

    Loops over the kernel taps (strided slices of a padded copy), keeping a running
    maximum, so memory stays O(output) and the same code runs on CuPy.
    """
    xp = _xp(x)
    size = x.shape[1:]
    axes = list(zip(size, out_size, kernel, stride, padding, dilation))
    # Pad enough on the right for ceil_mode windows that overhang the input.
    padded = tuple(max((o - 1) * s + (k - 1) * d + 1, n + p) for n, o, k, s, p, d in axes)
    xpad = xp.zeros(x.shape[:1] + padded, dtype=x.dtype)
    xpad[(slice(None),) + tuple(slice(p, p + n) for n, p in zip(size, padding))] = x
    windows = [_window_rows(*a, xp) for a in axes]
    best = xp.full(x.shape[:1] + tuple(out_size), -np.inf, dtype=x.dtype)
    arg = xp.full(best.shape, -1, dtype=np.int64)
    for tap in itertools.product(*(range(k) for k in kernel)):
        win = xpad[(slice(None),) + tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for
                                          t, (_, o, _, s, _, d) in zip(tap, axes))]
        inside, flat = True, 0
        for axis, (t, (pos, ok)) in enumerate(zip(tap, windows)):
            along = [1] * len(size)     # broadcast this axis' column against the others
            along[axis] = -1
            inside = inside & ok[:, t].reshape(along)
            flat = flat * size[axis] + pos[:, t].reshape(along)
        # The first tap inside the input always counts, even when it is -inf.
        upd = inside & ((win > best) | xp.isnan(win) | (arg < 0))
        best = xp.where(upd, win, best)
        arg = xp.where(upd, flat, arg)
    return best, arg


def _xp(a):
    from lezero.cuda import get_array_module
    return get_array_module(a)


# ----- Numba kernel ----------------------------------------------------------------------

@jit(cache=True, nogil=True, inline="always")
def _first_tap(start, k, d, size):
    """The range [lo, hi) of kernel taps of a window starting at ``start`` that fall
    inside an axis of length ``size`` (taps in the padding are skipped)."""
    lo = (-start + d - 1) // d if start < 0 else 0
    hi = min(k, (size - 1 - start) // d + 1)
    return lo, hi


@jit(cache=True, nogil=True)
def _max_pool2d(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, out, arg):
    R, H, W = x.shape
    for r in range(R):
        xr = x[r]
        for i in range(oh):
            h0 = i * sh - ph
            a_lo, a_hi = _first_tap(h0, kh, dh, H)
            for j in range(ow):
                w0 = j * sw - pw
                b_lo, b_hi = _first_tap(w0, kw, dw, W)
                # Start from the first tap inside the image (as PyTorch does), then a
                # later tap wins if strictly larger, or NaN.
                h, w = h0 + a_lo * dh, w0 + b_lo * dw
                best = xr[h, w]
                where = h * W + w
                for a in range(a_lo, a_hi):
                    h = h0 + a * dh
                    for b in range(b_lo, b_hi):
                        v = xr[h, w0 + b * dw]
                        if v > best or v != v:
                            best = v
                            where = h * W + w0 + b * dw
                out[r, i, j] = best
                arg[r, i, j] = where


def max_pool2d_numba(x, kernel, stride, padding, dilation, out_size):
    """The kernel version of ``max_pool_ref`` for 2-D windows (same arguments and results)."""
    x = np.ascontiguousarray(x)
    R = x.shape[0]
    out = np.empty((R,) + tuple(out_size), dtype=x.dtype)
    arg = np.empty((R,) + tuple(out_size), dtype=np.int64)
    _max_pool2d(x, *kernel, *stride, *padding, *dilation, *out_size, out, arg)
    return out, arg


# ----- dispatch ---------------------------------------------------------------------------

def max_pool(x, kernel, stride, padding, dilation, out_size):
    """The 2-D kernel for ``x`` (R, H, W) where ``enabled``, else the reference (also for
    3-D pooling of (R, D, H, W))."""
    if x.ndim == 3 and enabled(x):
        return max_pool2d_numba(x, kernel, stride, padding, dilation, out_size)
    return max_pool_ref(x, kernel, stride, padding, dilation, out_size)


def scatter_add_rows(g, idx, row_size):
    """``out[r, idx[r, j]] += g[r, j]`` into zeros of shape (R, row_size): max pooling's
    backward, done by the one scatter-add kernel (``scatter.scatter_add_``) on the
    flattened planes."""
    xp = _xp(g)
    R = g.shape[0]
    flat = (idx.reshape(R, -1) + (xp.arange(R) * row_size)[:, None]).reshape(-1)
    out = xp.zeros(R * row_size, dtype=g.dtype)
    scatter_add_(out, flat, g.reshape(-1))
    return out.reshape(R, row_size)


__all__ = ["max_pool", "max_pool_ref", "max_pool2d_numba", "scatter_add_rows"]
