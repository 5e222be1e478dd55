"""Max pooling with argmax indices: ``max_pool_ref`` (NumPy/CuPy), the 2-D Numba kernel
``max_pool2d_numba`` and the dispatcher ``max_pool``, which falls back to the reference
whenever ``lezero.kernels.enabled`` says no (CuPy arrays, ``Config.use_numba = False``,
no Numba).  Its backward, ``scatter_add_rows``, is the scatter-add kernel of
``lezero.kernels.scatter``, run over one plane per row.

Layout: ``x`` is ``(R, H, W)`` with ``R = N * C`` rows; indices are flat positions
``h * W + w`` into one row, as PyTorch's ``return_indices`` gives them.  3-D pooling
(``(R, D, H, W)``, indices ``(d * H + h) * W + w``) runs on the NumPy/CuPy reference.
Ties go to the first maximum in window order (row-major over the kernel), and a NaN
wins over numbers (the last NaN in window order), which is what PyTorch's CPU kernel does.
"""
import itertools

import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.kernels.scatter import check_index, out_of_range, run_planes, scatter_add_ref
from lezero.runtime import policy, run_ranges


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


# ----- Numba kernels ---------------------------------------------------------------------

# Two kernels per case.  The fast one keeps a running maximum with ``v > best`` alone,
# which LLVM compiles to branch-free max and conditional-move instructions: on real data
# the winning tap is random, and the branches of the exact loop (``v > best or v != v``)
# were mispredicted so often that the exact loop was six times slower
# (docs/performance.md).  The fast one also counts the windows holding a NaN,
# where ``>`` alone is wrong; when there are any, the caller reruns those rows with the
# exact kernel, whose tie and NaN rules are PyTorch's.

@jit(cache=True, nogil=True)
def _max_pool2d_exact(x, dh, dw, h_start, a_lo, a_hi, w_start, b_lo, b_hi, out, arg):
    R, H, W = x.shape
    for r in range(R):
        xr = x[r].reshape(H * W)
        for i in range(out.shape[1]):
            for j in range(out.shape[2]):
                w0 = w_start[j]
                # Start from the first tap inside the image (as PyTorch does), then a
                # later tap wins if strictly larger, or NaN.
                where = (h_start[i] + a_lo[i] * dh) * W + w0 + b_lo[j] * dw
                best = xr[where]
                for a in range(a_lo[i], a_hi[i]):
                    row = (h_start[i] + a * dh) * W + w0
                    for b in range(b_lo[j], b_hi[j]):
                        v = xr[row + b * dw]
                        if v > best or v != v:
                            best = v
                            where = row + b * dw
                out[r, i, j] = best
                arg[r, i, j] = where


@jit(cache=True, nogil=True, inline="always")
def _down_rows(xr, h0, a0, a1, dh, vmax, vrow, positions):
    """The first pass of an output row: for every input column, the maximum over the
    window's rows ``h0 + a * dh``, a in [a0, a1) (``vmax``) and, with ``positions``, the
    first row holding it (``vrow``) -- a contiguous loop LLVM vectorises.  Returns
    whether a NaN was read."""
    bad = False
    for w in range(xr.shape[1]):
        v = xr[h0 + a0 * dh, w]
        vmax[w] = v
        if positions:
            vrow[w] = h0 + a0 * dh
        bad |= v != v
    for a in range(a0 + 1, a1):
        h = h0 + a * dh
        for w in range(xr.shape[1]):
            v = xr[h, w]
            win = v > vmax[w]
            vmax[w] = v if win else vmax[w]
            if positions:
                vrow[w] = h if win else vrow[w]
            bad |= v != v
    return bad


@jit(cache=True, nogil=True)
def _max_pool2d(x, dh, dw, h_start, a_lo, a_hi, w_start, b_lo, b_hi, out, arg):
    """The fast general kernel, in two passes per output row (``_down_rows``), then
    along each window's columns of that, a later column winning if larger, or equal from
    an earlier row -- which keeps the first maximum in window order.  Returns whether a
    NaN was read (then the exact kernel reruns the part)."""
    W = x.shape[2]
    vmax = np.empty(W, x.dtype)
    vrow = np.empty(W, np.int64)
    bad = False
    for r in range(x.shape[0]):
        for i in range(out.shape[1]):
            bad |= _down_rows(x[r], h_start[i], a_lo[i], a_hi[i], dh, vmax, vrow, True)
            for j in range(out.shape[2]):
                c = w_start[j] + b_lo[j] * dw
                best, bh, bc = vmax[c], vrow[c], c
                for b in range(b_lo[j] + 1, b_hi[j]):
                    c = w_start[j] + b * dw
                    v, hv = vmax[c], vrow[c]
                    win = (v > best) | ((v == best) & (hv < bh))
                    best = v if win else best
                    bh = hv if win else bh
                    bc = c if win else bc
                out[r, i, j] = best
                arg[r, i, j] = bh * W + bc
    return bad


@jit(cache=True, nogil=True)
def _max_values2d(x, dh, dw, h_start, a_lo, a_hi, w_start, b_lo, b_hi, out):
    """``_max_pool2d`` without the positions (inference: nothing will scatter a gradient
    back), half its time; returns whether a NaN was read."""
    vmax = np.empty(x.shape[2], x.dtype)
    bad = False
    for r in range(x.shape[0]):
        for i in range(out.shape[1]):
            bad |= _down_rows(x[r], h_start[i], a_lo[i], a_hi[i], dh, vmax, vmax, False)
            for j in range(out.shape[2]):
                best = vmax[w_start[j] + b_lo[j] * dw]
                for b in range(b_lo[j] + 1, b_hi[j]):
                    v = vmax[w_start[j] + b * dw]
                    best = v if v > best else best
                out[r, i, j] = best
    return bad


@jit(cache=True, nogil=True)
def _max_pool2x2(x, out, arg):
    """The common case -- 2x2 windows, stride 2, no padding -- with the taps spelled out
    (short loops of unknown length cost more than the compares); returns the number of
    windows holding a NaN (the general exact kernel then reruns the part)."""
    R, H, W = x.shape
    xf = x.reshape(x.size)          # once: a reshape per plane costs ~0.1 us
    nans = 0
    for r in range(R):
        xr = xf[r * H * W:(r + 1) * H * W]
        for i in range(out.shape[1]):
            for j in range(out.shape[2]):
                where = 2 * i * W + 2 * j
                best = xr[where]
                bad = best != best
                for k in (where + 1, where + W, where + W + 1):
                    v = xr[k]
                    win = v > best
                    best = v if win else best
                    where = k if win else where
                    bad |= v != v
                out[r, i, j] = best
                arg[r, i, j] = where
                nans += bad
    return nans


def _window_taps(op, x, kernel, stride, padding, dilation, out_size):
    """The checked 2-D geometry as int tuples, and per axis (start, lo, hi) of its windows
    (``argcheck.tap_ranges``, computed once per call: integer division inside the kernels'
    loops costs more than the max).  The kernels start each window at its first tap
    inside the input, so every window must have one: ValueError if not."""
    argcheck.arrays(op, x=x)
    argcheck.floats(op, "x", x)
    argcheck.ndim_is(op, "x", x, 3)
    geom = argcheck.windows(op, x.shape[1:], out_size, kernel, stride, padding, dilation)
    kernel, stride, padding, dilation, out_size = geom
    taps = ()
    for axis in (0, 1):
        start, lo, hi = argcheck.tap_ranges(x.shape[1 + axis], out_size[axis], kernel[axis],
                                            stride[axis], padding[axis], dilation[axis])
        if (lo >= hi).any():
            raise ValueError(f"{op}: a window of axis {axis} has no tap inside the input "
                             f"{x.shape[1:]} (kernel {kernel}, stride {stride}, padding "
                             f"{padding}, dilation {dilation}, output size {out_size})")
        taps += (start, lo, hi)
    return geom, taps


def max_pool2d_numba(x, kernel, stride, padding, dilation, out_size):
    """The kernel version of ``max_pool_ref`` for 2-D windows (same arguments and results).
    Large inputs run as one range of rows per thread (``lezero.runtime.run_ranges``)."""
    (kernel, stride, padding, dilation, out_size), taps = _window_taps(
        "max_pool2d_numba", x, kernel, stride, padding, dilation, out_size)
    x = np.ascontiguousarray(x)
    R, H, W = x.shape
    out = np.empty((R,) + out_size, dtype=x.dtype)
    arg = np.empty((R,) + out_size, dtype=np.int64)
    oh, ow = out_size
    unrolled = (kernel == (2, 2) and stride == (2, 2) and not any(padding)
                and dilation == (1, 1) and 2 * oh <= H and 2 * ow <= W)

    def rows_(lo, hi):
        args = (x[lo:hi], dilation[0], dilation[1], *taps, out[lo:hi], arg[lo:hi])
        nans = _max_pool2x2(x[lo:hi], out[lo:hi], arg[lo:hi]) if unrolled else _max_pool2d(*args)
        if nans:
            _max_pool2d_exact(*args)
    run_ranges(rows_, R, x.size, policy.pool_min_part_items)
    return out, arg


def max_values2d_numba(x, kernel, stride, padding, dilation, out_size):
    """The values of ``max_pool2d_numba`` alone (no positions), split over threads the
    same way; a part that reads a NaN takes its values from ``max_pool2d_numba``."""
    (kernel, stride, padding, dilation, out_size), taps = _window_taps(
        "max_values2d_numba", x, kernel, stride, padding, dilation, out_size)
    x = np.ascontiguousarray(x)
    out = np.empty((x.shape[0],) + out_size, dtype=x.dtype)

    def rows_(lo, hi):
        if _max_values2d(x[lo:hi], dilation[0], dilation[1], *taps, out[lo:hi]):
            out[lo:hi] = max_pool2d_numba(x[lo:hi], kernel, stride, padding, dilation,
                                          out_size)[0]
    run_ranges(rows_, x.shape[0], x.size, policy.pool_min_part_items)
    return out


# ----- dispatch ---------------------------------------------------------------------------

def max_pool(x, kernel, stride, padding, dilation, out_size):
    """The 2-D kernel for ``x`` (R, H, W) where ``enabled``, else the reference (also for
    3-D pooling of (R, D, H, W))."""
    if x.ndim == 3 and enabled(x):
        return max_pool2d_numba(x, kernel, stride, padding, dilation, out_size)
    return max_pool_ref(x, kernel, stride, padding, dilation, out_size)


def max_values(x, kernel, stride, padding, dilation, out_size):
    """``max_pool(...)[0]``: the kernel without positions where ``enabled``."""
    if x.ndim == 3 and enabled(x):
        return max_values2d_numba(x, kernel, stride, padding, dilation, out_size)
    return max_pool_ref(x, kernel, stride, padding, dilation, out_size)[0]


def scatter_add_rows(g, idx, row_size):
    """``out[r, idx[r, j]] += g[r, j]`` into zeros of shape (R, row_size): max pooling's
    backward, done by the one scatter-add kernel (``scatter``, one plane per row) where
    ``enabled``, else by the reference on the flattened planes.  ``g`` and ``idx`` are
    (R, ...) of one shape; an index outside [-row_size, row_size) raises IndexError."""
    if g.shape != idx.shape or g.ndim < 1:
        raise ValueError(f"scatter_add_rows: g and idx must be (rows, ...) of one shape, "
                         f"got {g.shape} and {idx.shape}")
    argcheck.ints("scatter_add_rows", "row_size", (row_size,), 1, low=0)
    xp = _xp(g)
    R = g.shape[0]
    g, idx = g.reshape(R, -1), idx.reshape(R, -1)
    if enabled(g, idx) and g.dtype.kind == "f":
        check_index("scatter_add_rows", idx)
        out = np.zeros((R, row_size), dtype=g.dtype)
        run_ranges(lambda lo, hi: run_planes("scatter_add_rows", out[lo:hi], idx[lo:hi],
                                              g[lo:hi]),
                   R, out.size, policy.pool_min_part_items)
        return out
    from lezero.backends import get_backend
    if idx.size and not get_backend(g).is_host:  # no int() on a device: a sync per call
        idx = xp.where(idx < 0, idx + row_size, idx)
    elif idx.size:              # the kernel's rule: [-row_size, row_size), negatives wrap
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -row_size or hi >= row_size:
            raise out_of_range("scatter_add_rows", lo if lo < -row_size else hi, row_size)
        idx = xp.where(idx < 0, idx + row_size, idx) if lo < 0 else idx
    flat = (idx + (xp.arange(R) * row_size)[:, None]).reshape(-1)
    out = xp.zeros(R * row_size, dtype=g.dtype)
    scatter_add_ref(out, flat, g.reshape(-1))
    return out.reshape(R, row_size)


__all__ = ["max_pool", "max_pool_ref", "max_pool2d_numba", "max_values", "max_values2d_numba",
           "scatter_add_rows"]
