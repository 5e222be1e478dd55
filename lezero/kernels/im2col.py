"""im2col / col2im: the patch gather behind GEMM convolution, and its adjoint.

Both work on 3-D spatial geometry (1-D and 2-D convolutions pass leading sizes of one),
so one pair of kernels serves conv1d, conv2d and conv3d, ``unfold`` and ``fold``.

Layout.  ``x`` is ``(N, C, D, H, W)``; ``col`` is indexed ``col[c * K + p, n, l]`` where
``K = kd * kh * kw``, ``p`` is the flat kernel position and ``l`` the flat output position.
That puts the channel-kernel rows first, so a whole convolution is one GEMM
``W (Cout, C*K) @ col (C*K, N*L)`` over the batch at once.  ``unfold`` wants
``(N, C*K, L)``: it passes ``out.transpose(1, 0, 2)`` (a view), which the kernels accept.

``geo`` is a tuple of 15 ints: kernel (3), stride (3), low padding (3), dilation (3) and
output size (3).  Padding is applied on the fly (reads outside ``x`` give zero, writes
outside ``x`` are dropped), so no padded copy of ``x`` is ever made.

``im2col_ref`` / ``col2im_ref`` are the NumPy references the tests compare against; the
Numba kernels (``im2col_numba`` / ``col2im_numba``) run in parallel over ``(n, c)`` planes,
which write disjoint memory; ``im2col`` / ``col2im`` dispatch.
"""
import itertools

import numpy as np

from lezero.kernels import argcheck, enabled, jit, numba_available, prange, uint64
from lezero.runtime import launch, policy



# ----- NumPy references ------------------------------------------------------------------

def _views(geo, in_size):
    """For each kernel position: its flat index and the slices of the padded input that
    it reads (one per spatial dim)."""
    k, s, d, out = geo[0:3], geo[3:6], geo[9:12], geo[12:15]
    for p, pos in enumerate(itertools.product(*[range(ki) for ki in k])):
        yield p, tuple(slice(pos[i] * d[i], pos[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i])
                       for i in range(3))


def _pad_width(geo, in_size):
    """Zero padding that makes every window of the geometry fit inside the input."""
    k, s, lo, d, out = geo[0:3], geo[3:6], geo[6:9], geo[9:12], geo[12:15]
    width = []
    for i in range(3):
        need = (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1     # extent the windows cover
        width.append((lo[i], max(0, need - lo[i] - in_size[i])))
    return width


def im2col_ref(x, col, geo):
    """Fill ``col`` (indexed ``[c*K + p, n, l]``) with the patches of ``x``: NumPy/CuPy."""
    N, C = x.shape[:2]
    K = geo[0] * geo[1] * geo[2]
    xp_ = _module_of(x)
    width = _pad_width(geo, x.shape[2:])
    # Crop first: an input larger than the windows cover (negative high padding) is fine.
    xpad = xp_.pad(x, [(0, 0), (0, 0)] + width)
    L = geo[12] * geo[13] * geo[14]
    col5 = col.reshape(C, K, N, L)
    for p, sl in _views(geo, x.shape[2:]):
        patch = xpad[(slice(None), slice(None)) + sl]               # (N, C, Do, Ho, Wo)
        col5[:, p] = patch.reshape(N, C, L).transpose(1, 0, 2)
    return col


def col2im_ref(col, x, geo):
    """Add the columns of ``col`` back into their positions of ``x`` (the adjoint of
    ``im2col``): overlapping windows sum.  ``x`` must be zeroed by the caller."""
    N, C = x.shape[:2]
    K = geo[0] * geo[1] * geo[2]
    xp_ = _module_of(x)
    width = _pad_width(geo, x.shape[2:])
    padded = tuple(x.shape[2 + i] + width[i][0] + width[i][1] for i in range(3))
    xpad = xp_.zeros((N, C) + padded, dtype=x.dtype)
    col5 = col.reshape(C, K, N, *geo[12:15])
    for p, sl in _views(geo, x.shape[2:]):
        xpad[(slice(None), slice(None)) + sl] += col5[:, p].transpose(1, 0, 2, 3, 4)
    inner = tuple(slice(w[0], w[0] + n) for w, n in zip(width, x.shape[2:]))
    x += xpad[(slice(None), slice(None)) + inner]
    return x


def _module_of(a):
    from lezero.cuda import get_array_module
    return get_array_module(a)


# ----- Numba kernels -----------------------------------------------------------------------
# Defined at module level (Numba's cache cannot reload closures) and compiled on first use
# (``lezero.kernels.jit``), so importing this module does not import Numba.

def _valid_range(n_out, stride, offset, size):
    """The outputs ``o`` in [0, n_out) whose input index ``o*stride + offset`` lies in
    [0, size): returned as (first, stop)."""
    first = 0 if offset >= 0 else (-offset + stride - 1) // stride
    stop = 0 if size - 1 - offset < 0 else (size - 1 - offset) // stride + 1
    stop = min(stop, n_out)
    return first, max(first, stop)


_valid_range_nb = jit(cache=True, inline="always")(_valid_range)


@jit(cache=True, nogil=True, inline="always")
def _row(cf, xf, ud, us, count, sw, usw, gather):
    """Copy ``count`` elements of one output row: input ``xf[us + j*sw]`` into column
    ``cf[ud + j]`` (``gather``), else add the column back into the input.  Stride 1 has
    its own loops so that LLVM vectorises them."""
    if gather and sw == 1:
        for j in range(count):
            uj = uint64(j)
            cf[ud + uj] = xf[us + uj]
    elif gather:
        for j in range(count):
            uj = uint64(j)
            cf[ud + uj] = xf[us + uj * usw]
    elif sw == 1:
        for j in range(count):
            uj = uint64(j)
            xf[us + uj] += cf[ud + uj]
    else:
        for j in range(count):
            uj = uint64(j)
            xf[us + uj * usw] += cf[ud + uj]


@jit(cache=True, nogil=True, inline="always")
def _planes(x, col, geo, first, stop, gather):
    """The (n, c) planes ``first <= c * N + n < stop``: with ``gather`` im2col (copy the
    rows of each flat input plane into the flat column rows, zeroing what falls in the
    padding), else col2im (add the column rows back into ``x``).

    Loop order: channel, kernel tap, then sample, so each column row ``col[c * K + p]``
    is written (or read) front to back, not visited once per sample (faster by a third:
    docs/performance.md).  Where a tap's output rows are whole input rows that follow each
    other (stride 1, no padding across the width: a 1x1 kernel), they are copied as one
    run instead of row by row.  Indices are unsigned: Numba then skips its
    negative-index wrap-around test, which would otherwise keep LLVM from vectorising the
    copies; stride 1 gets its own loop for the same reason."""
    N, C, D, H, W = x.shape
    kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, Do, Ho, Wo = geo
    K = kd * kh * kw
    usw = uint64(sw)
    whole = sh == 1 and sw == 1 and Wo == W      # output rows as long as input rows
    xf = x.reshape(x.size)      # once: a reshape per plane cost more than a short copy
    if stop <= first:                  # no planes (an empty batch: N may be 0)
        return
    for c in range(first // N, (stop - 1) // N + 1):
        n0, n1 = max(first - c * N, 0), min(stop - c * N, N)
        for a in range(kd):
            for b in range(kh):
                r0, r1 = _valid_range_nb(Ho, sh, b * dh - ph, H)
                for e in range(kw):
                    row = col[c * K + (a * kh + b) * kw + e]
                    w0, w1 = _valid_range_nb(Wo, sw, e * dw - pw, W)
                    # whole input rows that follow each other (1x1): one run of all rows
                    run = whole and w0 == 0 and w1 == Wo and e * dw == pw
                    count = (r1 - r0) * Wo if run else w1 - w0
                    for n in range(n0, n1):
                        cf = row[n]
                        for od in range(Do):
                            iz = od * sd - pd + a * dd
                            b0 = od * Ho * Wo
                            if iz < 0 or iz >= D or r1 <= r0:
                                if gather:
                                    cf[b0:b0 + Ho * Wo] = 0
                                continue
                            plane = uint64(((n * C + c) * D + iz) * H * W)
                            if gather and r0 > 0:
                                cf[b0:b0 + r0 * Wo] = 0              # rows in the padding
                            if gather and r1 < Ho:
                                cf[b0 + r1 * Wo:b0 + Ho * Wo] = 0
                            for oh in range(r0, r0 + 1 if run else r1):
                                base = b0 + oh * Wo
                                ud = uint64(base + w0)
                                us = plane + uint64((oh * sh - ph + b * dh) * W + w0 * sw
                                                    + e * dw - pw)
                                if gather:
                                    # columns in the padding (tested first: an empty slice
                                    # assignment still costs as much as a short copy)
                                    if w0 > 0:
                                        cf[base:base + w0] = 0
                                    if w1 < Wo:
                                        cf[base + w1:base + Wo] = 0
                                _row(cf, xf, ud, us, count, sw, usw, gather)


@jit(cache=True, nogil=True)
def im2col_planes(x, col, geo, first, stop):
    """im2col for the planes ``first <= c * N + n < stop``."""
    _planes(x, col, geo, first, stop, True)


@jit(cache=True, parallel=True)
def im2col_nb(x, col, geo):
    """im2col over all planes in parallel (planes write disjoint parts of ``col``)."""
    for p in prange(x.shape[0] * x.shape[1]):
        im2col_planes(x, col, geo, p, p + 1)


@jit(cache=True, nogil=True)
def col2im_planes(col, x, geo, first, stop):
    """col2im for the planes ``first <= c * N + n < stop`` of ``x``."""
    _planes(x, col, geo, first, stop, False)


@jit(cache=True, parallel=True)
def col2im_nb(col, x, geo):
    """col2im over all planes in parallel: each plane of ``x`` has one writer."""
    for p in prange(x.shape[0] * x.shape[1]):
        col2im_planes(col, x, geo, p, p + 1)


def check_columns(op, x, col, geo):
    """Check ``x`` (N, C, D, H, W), ``col`` (C * K, N, L) and the 15 ints of ``geo``
    against each other: the kernels write ``col`` rows by unsigned offsets computed from
    them.  Returns ``geo`` as a tuple of ints."""
    argcheck.arrays(op, x=x, col=col)
    argcheck.ndim_is(op, "x", x, 5)
    argcheck.ndim_is(op, "col", col, 3)
    argcheck.dtype_is(op, "col", col, x.dtype)
    geo = argcheck.ints(op, "geo", geo, 15)
    argcheck.windows(op, x.shape[2:], geo[12:15], geo[0:3], geo[3:6], geo[6:9], geo[9:12])
    n, c = x.shape[:2]
    argcheck.shape_is(op, "col", col, (c * geo[0] * geo[1] * geo[2], n,
                                       geo[12] * geo[13] * geo[14]))
    return geo


def im2col_numba(x, col, geo):
    """The kernel version of ``im2col_ref`` (NumPy arrays)."""
    geo = check_columns("im2col_numba", x, col, geo)
    launch(im2col_nb, im2col_planes, col.size, x.shape[0] * x.shape[1],
           np.ascontiguousarray(x), col, geo, min_part=policy.gather_min_part_items)
    return col


def col2im_numba(col, x, geo):
    """The kernel version of ``col2im_ref`` (``x`` C-contiguous, zeroed)."""
    geo = check_columns("col2im_numba", x, col, geo)
    argcheck.c_contiguous("col2im_numba", "x", x)      # the kernel adds into flat planes
    launch(col2im_nb, col2im_planes, col.size, x.shape[0] * x.shape[1], col, x, geo,
           min_part=policy.gather_min_part_items)
    return x


# ----- dispatch ---------------------------------------------------------------------------

def use_kernel(a, use_numba=None):
    """Whether a convolution kernel runs for ``a``: ``use_numba`` None asks
    ``kernels.enabled``; True or False forces the choice (True still needs Numba and a
    NumPy array)."""
    if use_numba is None:
        return enabled(a)
    return use_numba and isinstance(a, np.ndarray) and numba_available()


def im2col(x, col, geo, use_numba=None):
    """Fill ``col`` from ``x`` (5-D): the kernel where it may run, else the reference."""
    return (im2col_numba if use_kernel(x, use_numba) else im2col_ref)(x, col, geo)


def col2im(col, x, geo, use_numba=None):
    """Add ``col`` into the zeroed 5-D ``x``: the kernel where it may run, else the
    reference."""
    return (col2im_numba if use_kernel(x, use_numba) else col2im_ref)(col, x, geo)
