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
import functools
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

# Two kernels for the positions.  The fast one keeps a running maximum with ``v > best``
# alone, which LLVM compiles to branch-free max and conditional-move instructions: on
# real data the winning tap is random, and the branches of the exact loop (``v > best or
# v != v``) were mispredicted so often that the exact loop was six times slower
# (docs/performance.md).  The fast one also counts the windows holding a NaN, where
# ``>`` alone is wrong; when there are any, the caller reruns those rows with the exact
# kernel, whose tie and NaN rules are PyTorch's.  The values alone (``_max_values2d``)
# need no rerun: their select keeps a NaN.

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
def _down_rows(xr, h0, a0, a1, dh, vmax, vrow):
    """The first pass of an output row: for every input column, the maximum over the
    window's rows ``h0 + a * dh``, a in [a0, a1), and the first row holding it -- a
    contiguous loop LLVM vectorises.  ``vmax`` and ``vrow`` are (2, W): each row read
    goes from one of their rows into the other (updated in place, LLVM stored through
    masks, which AMD CPUs run microcoded).  Returns (maxima, rows, whether a NaN was
    read)."""
    bad = False
    first = h0 + a0 * dh
    for w in range(xr.shape[1]):
        v = xr[first, w]
        vmax[0, w] = v
        vrow[0, w] = first
        bad |= v != v
    k = 0
    for a in range(a0 + 1, a1):
        h = h0 + a * dh
        row, sm, sr, dm, dr = xr[h], vmax[k], vrow[k], vmax[1 - k], vrow[1 - k]
        for w in range(row.shape[0]):
            v, m, hm = row[w], sm[w], sr[w]
            # one select and integer arithmetic: two selects on one condition became
            # a branch that LLVM turned into masked stores again
            dm[w] = v if v > m else m
            dr[w] = hm + (np.int32(h) - hm) * np.int32(v > m)
            bad |= v != v
        k = 1 - k
    return vmax[k], vrow[k], bad


@jit(cache=True, nogil=True, inline="always")
def _later_tap(best, bh, bc, v, hv, c):
    """One more column of a window in the second pass: it wins if larger, or equal and
    from an earlier row (which keeps the first maximum in window order)."""
    win = (v > best) | ((v == best) & (hv < bh))
    w32 = np.int32(win)
    return (v if win else best), bh + (hv - bh) * w32, bc + (c - bc) * w32


@jit(cache=True, nogil=True, inline="always")
def _window_at(vmax, vrow, start, lo, hi, dw, W):
    """One window's maximum over its columns ``start + b * dw``, lo <= b < hi, of the
    first pass, and its flat position."""
    c = start + lo * dw
    best, bh, bc = vmax[c], vrow[c], np.int32(c)
    for b in range(lo + 1, hi):
        c = start + b * dw
        best, bh, bc = _later_tap(best, bh, bc, vmax[c], vrow[c], np.int32(c))
    return best, np.int64(bh) * W + bc


@jit(cache=True, nogil=True)
def _max_pool2d(x, dh, dw, h_start, a_lo, a_hi, w_start, b_lo, b_hi, out, arg, j0, j1):
    """The fast general kernel, in two passes per output row (``_down_rows``), then
    along each window's columns of that (``_later_tap``).  The windows ``j0 <= j < j1``
    lie inside the input: 3 wide at stride 2 (ResNet's pooling) their three columns are
    spelled out, which LLVM vectorises.  Returns whether a NaN was read (then the exact
    kernel reruns the part)."""
    W = x.shape[2]
    three = j1 > j0 + 1 and b_hi[j0] - b_lo[j0] == 3 and w_start[j0 + 1] - w_start[j0] == 2 \
        and dw == 1
    skip0, skip1 = (j0, j1) if three else (0, 0)
    vmaxes = np.empty((2, W), x.dtype)
    vrows = np.empty((2, W), np.int32)      # rows: 32-bit lanes, as the values'
    bad = False
    for r in range(x.shape[0]):
        for i in range(out.shape[1]):
            vmax, vrow, nan = _down_rows(x[r], h_start[i], a_lo[i], a_hi[i], dh, vmaxes,
                                         vrows)
            bad |= nan
            if three:       # views from the first full window: indices known >= 0
                cs = max(w_start[j0], 0)
                pm, pr, po, pa = vmax[cs:], vrow[cs:], out[r, i, j0:j1], arg[r, i, j0:j1]
                for j in range(j1 - j0):
                    c = 2 * j
                    best, bh, bc = _later_tap(pm[c], pr[c], np.int32(0), pm[c + 1],
                                              pr[c + 1], np.int32(1))
                    best, bh, bc = _later_tap(best, bh, bc, pm[c + 2], pr[c + 2], np.int32(2))
                    po[j] = best
                    pa[j] = np.int64(bh) * W + (bc + c + cs)
            for j in range(skip0):                      # the other windows
                out[r, i, j], arg[r, i, j] = _window_at(vmax, vrow, w_start[j], b_lo[j],
                                                        b_hi[j], dw, W)
            for j in range(skip1, out.shape[2]):
                out[r, i, j], arg[r, i, j] = _window_at(vmax, vrow, w_start[j], b_lo[j],
                                                        b_hi[j], dw, W)
    return bad


@jit(cache=True, nogil=True, inline="always")
def _max2(a, b):
    """The larger of two numbers, NaN if either is: ``b`` wins if larger or NaN, and a NaN
    ``a`` is larger than nothing.  Written as a select, not ``max``: LLVM vectorises it."""
    return b if (b > a) | (b != b) else a


@jit(cache=True, nogil=True, inline="always")
def _rows_max(xr, h, a0, a1, dh, v, spare):
    """``v[w]`` = the maximum over the rows ``h + a * dh``, a in [a0, a1), of ``xr``
    (NaN if any is); returns the buffer holding it (``v`` or ``spare``).  Each loop reads
    rows and writes another buffer: updating ``v`` in place made LLVM store through masks
    (``vmaskmovps``), which AMD CPUs run microcoded, several times slower."""
    r0 = xr[h + a0 * dh]
    r2 = xr[h + (min(a1, a0 + 3) - 1) * dh]
    r1 = xr[h + min(a0 + 1, a1 - 1) * dh]       # a window of one or two rows repeats one
    for w in range(v.shape[0]):
        v[w] = _max2(_max2(r0[w], r1[w]), r2[w])
    for a in range(a0 + 3, a1):                 # taller windows: one row more per pass
        row = xr[h + a * dh]
        for w in range(v.shape[0]):
            spare[w] = _max2(v[w], row[w])
        v, spare = spare, v
    return v


@jit(cache=True, nogil=True, inline="always")
def _columns_max(vmax, start, lo, hi, dw):
    """The maximum of ``vmax`` over one window's columns ``start + b * dw``, lo <= b < hi."""
    best = vmax[start + lo * dw]
    for b in range(lo + 1, hi):
        best = _max2(best, vmax[start + b * dw])
    return best


@jit(cache=True, nogil=True)
def _max_values2d(x, dh, dw, h_start, a_lo, a_hi, w_start, b_lo, b_hi, out, j0, j1):
    """The maxima alone (inference: nothing will scatter a gradient back), NaN if a
    window holds one, in two passes per output row: over the window's rows
    (``_rows_max``), then along its columns.  The windows ``j0 <= j < j1`` lie inside
    the input; for 3 wide at stride 2 (ResNet's pooling) or 2 wide at stride 2 their
    columns are spelled out, which LLVM vectorises (several times faster than a loop
    over the taps)."""
    W = x.shape[2]
    kw = b_hi[j0] - b_lo[j0] if j1 > j0 else 0
    sw = w_start[j0 + 1] - w_start[j0] if j1 > j0 + 1 else 0
    three, two = kw == 3 and sw == 2 and dw == 1, kw == 2 and sw == 2 and dw == 1
    skip0, skip1 = (j0, j1) if three or two else (0, 0)
    cs = max(w_start[j0], 0) if j1 > j0 else 0      # where the first full window starts
    v0, v1 = np.empty(W, x.dtype), np.empty(W, x.dtype)
    for r in range(x.shape[0]):
        for i in range(out.shape[1]):
            vmax = _rows_max(x[r], h_start[i], a_lo[i], a_hi[i], dh, v0, v1)
            o = out[r, i]
            # views from the first full window: indices known >= 0 (no wraparound test)
            pv, po = vmax[cs:], o[j0:j1]
            if three:
                for j in range(j1 - j0):
                    po[j] = _max2(_max2(pv[2 * j], pv[2 * j + 1]), pv[2 * j + 2])
            elif two:
                for j in range(j1 - j0):
                    po[j] = _max2(pv[2 * j], pv[2 * j + 1])
            # the other windows tap by tap (a loop over all j skipping the run above
            # cost as much as the run itself)
            for j in range(skip0):
                o[j] = _columns_max(vmax, w_start[j], b_lo[j], b_hi[j], dw)
            for j in range(skip1, out.shape[2]):
                o[j] = _columns_max(vmax, w_start[j], b_lo[j], b_hi[j], dw)


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
    (``argcheck.tap_ranges``, computed once per geometry: integer division inside the
    kernels' loops costs more than the max, and the NumPy calls making them cost more
    than a small pooling's kernel).  The kernels start each window at its first tap
    inside the input, so every window must have one: ValueError if not."""
    argcheck.arrays(op, x=x)
    argcheck.floats(op, "x", x)
    argcheck.ndim_is(op, "x", x, 3)
    geom = argcheck.windows(op, x.shape[1:], out_size, kernel, stride, padding, dilation)
    return geom, _taps_of(op, x.shape[1:], geom)


@functools.lru_cache(maxsize=256)
def _taps_of(op, size, geom):
    """``_window_taps``' arrays for a checked geometry (shared by the calls that meet it:
    the kernels only read them)."""
    kernel, stride, padding, dilation, out_size = geom
    taps = ()
    for axis in (0, 1):
        start, lo, hi = argcheck.tap_ranges(size[axis], out_size[axis], kernel[axis],
                                            stride[axis], padding[axis], dilation[axis])
        if (lo >= hi).any():
            raise ValueError(f"{op}: a window of axis {axis} has no tap inside the input "
                             f"{size} (kernel {kernel}, stride {stride}, padding "
                             f"{padding}, dilation {dilation}, output size {out_size})")
        taps += (start, lo, hi)
    return taps


def _inside(taps, width):
    """``(j0, j1)``: the output columns whose windows lie wholly inside the input (one run;
    (0, 0) if none), from the column taps of ``_window_taps``."""
    _, lo, hi = taps[3:]
    full = np.flatnonzero((lo == 0) & (hi == width))
    if not full.size or full.size != full[-1] + 1 - full[0]:
        return 0, 0
    return int(full[0]), int(full[-1]) + 1


@functools.lru_cache(maxsize=256)
def _inside_of(op, size, geom):
    """``_inside`` of a checked geometry, computed once per geometry."""
    return _inside(_taps_of(op, size, geom), geom[0][1])


def max_pool2d_numba(x, kernel, stride, padding, dilation, out_size):
    """The kernel version of ``max_pool_ref`` for 2-D windows (same arguments and results).
    Large inputs run as one range of rows per thread (``lezero.runtime.run_ranges``)."""
    geom, taps = _window_taps("max_pool2d_numba", x, kernel, stride, padding, dilation,
                              out_size)
    kernel, stride, padding, dilation, out_size = geom
    if x.shape[1] >= 2 ** 31:           # the kernel keeps row numbers in 32 bits
        raise ValueError(f"max_pool2d_numba: planes of {x.shape[1]} rows; the kernel "
                         "takes fewer than 2^31 (max_pool_ref takes any)")
    x = np.ascontiguousarray(x)
    R, H, W = x.shape
    out = np.empty((R,) + out_size, dtype=x.dtype)
    arg = np.empty((R,) + out_size, dtype=np.int64)
    oh, ow = out_size
    unrolled = (kernel == (2, 2) and stride == (2, 2) and not any(padding)
                and dilation == (1, 1) and 2 * oh <= H and 2 * ow <= W)
    j0, j1 = (0, 0) if unrolled else _inside_of("max_pool2d_numba", x.shape[1:], geom)

    def rows_(lo, hi):
        args = (x[lo:hi], dilation[0], dilation[1], *taps, out[lo:hi], arg[lo:hi])
        nans = _max_pool2x2(x[lo:hi], out[lo:hi], arg[lo:hi]) if unrolled else \
            _max_pool2d(*args, j0, j1)
        if nans:
            _max_pool2d_exact(*args)
    run_ranges(rows_, R, x.size, policy.pool_min_part_items)
    return out, arg


def max_values2d_numba(x, kernel, stride, padding, dilation, out_size):
    """The values of ``max_pool2d_numba`` alone (no positions), split over threads the
    same way; a window holding a NaN gives NaN, as in PyTorch."""
    geom, taps = _window_taps("max_values2d_numba", x, kernel, stride, padding, dilation,
                              out_size)
    kernel, stride, padding, dilation, out_size = geom
    x = np.ascontiguousarray(x)
    out = np.empty((x.shape[0],) + out_size, dtype=x.dtype)
    j0, j1 = _inside_of("max_values2d_numba", x.shape[1:], geom)
    # a part needs 4x the input of the positions kernel's: it runs ~4x faster per element
    run_ranges(lambda lo, hi: _max_values2d(x[lo:hi], dilation[0], dilation[1], *taps,
                                            out[lo:hi], j0, j1),
               x.shape[0], x.size, 4 * policy.pool_min_part_items)
    return out


# ----- dispatch ---------------------------------------------------------------------------

def max_pool(x, kernel, stride, padding, dilation, out_size):
    """The 2-D kernel for ``x`` (R, H, W) where ``enabled``, else the reference (also for
    3-D pooling of (R, D, H, W))."""
    if x.ndim == 3 and enabled(x) and x.shape[1] < 2 ** 31:
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
