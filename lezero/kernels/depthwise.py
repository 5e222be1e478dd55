"""Depthwise 2-D convolution kernels (``groups == in_channels``, any channel multiplier).

Output channel ``o`` reads only input channel ``o // m`` (``m = out / in``, the channel
multiplier), so each product is a sum of ``kh * kw`` shifted, scaled copies of one plane.
The general tap-loop kernels (``conv_direct``) pay their loop set-up once per (row, tap)
and bound-check every tap: on MobileNet's 14x14 and 7x7 maps that set-up is the whole
cost.  Here each plane is first copied into a zero-bordered buffer (once per sample and
input channel), so every tap of every output row reads in range:

    depthwise_forward       y[n, o]        = sum_ab w[o, 0, a, b] * xpad[n, o // m] at (a, b)
    depthwise_grad_input    gx[n, c]       = sum_{o of c} the taps of gy[n, o] added back
    depthwise_grad_weight   gw[o, 0, a, b] = sum_n <gy[n, o], xpad[n, o // m] at (a, b)>

How the loops run: a 3x3 window (no dilation, column stride 1 or 2) sums its nine taps
in registers and stores each output once (``_nine_row``); other windows run a row of
three taps as one unrolled loop (strides 1 and 2 as compile-time constants), stride-1
planes at least ``WIDE_MIN`` wide on wide rows (one loop per tap row over the whole
plane); the input gradient at stride 1 is gathered like a forward pass (``gy`` in a zero
border, flipped taps), at other strides scattered; on narrow maps the forward pass runs
channels-last (``channels_last``), its inner loops over the channels.  Forward and input
gradient run in parallel over (sample, channel) planes or output rows, the weight
gradient over output channels.

Arrays are 4-D (N, C, H, W) and ``geo`` is ``(kh, kw, sh, sw, ph, pw, dh, dw)`` as in
``conv_direct``.  ``depthwise_*_ref`` are the NumPy references (also the CuPy path): one
strided slice per tap over all planes at once.  Offsets go into row views or unsigned
indices: an index ``off + j`` with ``off`` unknown may be negative, and Numba's
wraparound test on it keeps LLVM from vectorising the loop (the plane copy ran 4-6x
slower with it).
"""
import numpy as np

from lezero.kernels import argcheck, jit, prange, uint64
from lezero.kernels.im2col import _valid_range, use_kernel
from lezero.runtime import launch, policy

# Parallel chunks: each zeroes and fills its own padded buffer once.
_CHUNKS = 64
# Stride-1 planes at least this wide are summed on wide rows (``_wide_taps``); narrower
# ones row by row (measured: wide rows pay from 28 columns on, cost 40% more at 7).
WIDE_MIN = 16
# A 3x3 stride-1 window sums its nine taps on wide rows below NINE_WIDE_BELOW columns,
# channels-last below NINE_CL_BELOW (one thread, AMD EPYC, MobileNetV2's layers: wide rows
# 0.65-0.9x the row loops' time at 10..28 columns, 1.1-1.25x at 40..112).
NINE_WIDE_BELOW, NINE_CL_BELOW = 32, 8


# ----- NumPy references ------------------------------------------------------------------

def _tap_views(geo, x_hw, y_hw):
    """Per tap: (a, b, output slices, input slices) of the part inside the input."""
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    for a in range(kh):
        r0, r1 = _valid_range(y_hw[0], sh, a * dh - ph, x_hw[0])
        for b in range(kw):
            c0, c1 = _valid_range(y_hw[1], sw, b * dw - pw, x_hw[1])
            if r1 > r0 and c1 > c0:
                xs = (slice(r0 * sh + a * dh - ph, (r1 - 1) * sh + a * dh - ph + 1, sh),
                      slice(c0 * sw + b * dw - pw, (c1 - 1) * sw + b * dw - pw + 1, sw))
                yield a, b, (slice(r0, r1), slice(c0, c1)), xs


def _per_output(x, mult):
    """``x (N, C, ...)`` with each channel repeated ``mult`` times (a view when 1)."""
    return x if mult == 1 else x.repeat(mult, axis=1)


def depthwise_forward_ref(x, w, y, geo):
    """``y`` (any contents) = the depthwise convolution of ``x`` with ``w``."""
    mult = w.shape[0] // x.shape[1]
    y[...] = 0
    for a, b, ys, xs in _tap_views(geo, x.shape[2:], y.shape[2:]):
        y[(Ellipsis,) + ys] += w[None, :, 0, a, b, None, None] * _per_output(
            x[(Ellipsis,) + xs], mult)
    return y


def depthwise_grad_input_ref(gy, w, gx, geo):
    """``gx`` (any contents) = the input gradient from ``gy`` and ``w``."""
    n, c = gx.shape[:2]
    mult = w.shape[0] // c
    gx[...] = 0
    for a, b, ys, xs in _tap_views(geo, gx.shape[2:], gy.shape[2:]):
        part = w[None, :, 0, a, b, None, None] * gy[(Ellipsis,) + ys]
        gx[(Ellipsis,) + xs] += part.reshape((n, c, mult) + part.shape[2:]).sum(axis=2)
    return gx


def depthwise_grad_weight_ref(x, gy, gw, geo):
    """``gw`` (any contents) = the weight gradient from ``x`` and ``gy``."""
    mult = gw.shape[0] // x.shape[1]
    gw[...] = 0
    for a, b, ys, xs in _tap_views(geo, x.shape[2:], gy.shape[2:]):
        prod = gy[(Ellipsis,) + ys] * _per_output(x[(Ellipsis,) + xs], mult)
        gw[:, 0, a, b] = prod.sum(axis=(0, 2, 3))
    return gw


# ----- Numba kernels ---------------------------------------------------------------------

@jit(cache=True, inline="always")
def _buffer_shape(geo, in_hw, out_hw):
    """Rows and columns of the padded plane: the windows' extent and the padded input."""
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    rows = max((out_hw[0] - 1) * sh + (kh - 1) * dh + 1, ph + in_hw[0])
    cols = max((out_hw[1] - 1) * sw + (kw - 1) * dw + 1, pw + in_hw[1])
    return rows, cols


@jit(cache=True, inline="always")
def _fill(buf, plane, ph, pw):
    """Copy ``plane`` into ``buf`` at (ph, pw); the border stays as it is (zero).  The
    column offset goes into the row's view, not the index: an index ``pw + j`` with
    ``pw`` unknown may be negative, and Numba's wraparound check on it kept the loop
    from vectorising (4-6x slower)."""
    w = plane.shape[1]
    for i in range(plane.shape[0]):
        row = buf[ph + i, pw:pw + w]
        src = plane[i]
        for j in range(w):
            row[j] = src[j]


@jit(cache=True, inline="always")
def _taps_row(dst, xr, wr, sw, dw):
    """``dst[j] += sum_b wr[b] * xr[j * sw + b * dw]``: one row of taps into one row."""
    n = dst.shape[0]
    if wr.shape[0] == 3 and dw == 1 and sw == 1:
        w0, w1, w2 = wr[0], wr[1], wr[2]
        for j in range(n):
            dst[j] += w0 * xr[j] + w1 * xr[j + 1] + w2 * xr[j + 2]
    elif wr.shape[0] == 3 and dw == 1 and sw == 2:
        w0, w1, w2 = wr[0], wr[1], wr[2]
        for j in range(n):
            k = 2 * j
            dst[j] += w0 * xr[k] + w1 * xr[k + 1] + w2 * xr[k + 2]
    else:
        usw = uint64(sw)
        for b in range(wr.shape[0]):
            wb, off = wr[b], uint64(b * dw)
            for j in range(n):
                dst[j] += wb * xr[off + uint64(j) * usw]


@jit(cache=True, inline="always")
def _zero(row):
    for j in range(row.shape[0]):
        row[j] = 0


@jit(cache=True, inline="always")
def _plane_taps(out, buf, wp, r0, c0, sh, sw, dh, dw):
    """``out[i] += taps of wp over buf`` for every row, rows starting at ``r0 + i * sh``
    and columns at ``c0``.  Called with literal strides (see ``_strided``)."""
    for i in range(out.shape[0]):
        for a in range(wp.shape[0]):
            _taps_row(out[i], buf[r0 + i * sh + a * dh, c0:], wp[a], sw, dw)


@jit(cache=True, inline="always")
def _strided(out, buf, wp, r0, c0, sh, sw, dh, dw):
    """``_plane_taps`` with the common column strides as constants: a stride the compiler
    knows keeps the row loops vectorised (a runtime one made them 5x slower)."""
    if sw == 1 and dw == 1:
        _plane_taps(out, buf, wp, r0, c0, sh, 1, dh, 1)
    elif sw == 2 and dw == 1:
        _plane_taps(out, buf, wp, r0, c0, sh, 2, dh, 1)
    else:
        _plane_taps(out, buf, wp, r0, c0, sh, sw, dh, dw)


@jit(cache=True, inline="always")
def _nine_row(dst, r0, r1, r2, wp, sw):
    """``dst[j] = sum_ab wp[a, b] * r_a[j * sw + b]``: a 3x3 window's nine taps summed in
    registers, one store per output."""
    w00, w01, w02 = wp[0, 0], wp[0, 1], wp[0, 2]
    w10, w11, w12 = wp[1, 0], wp[1, 1], wp[1, 2]
    w20, w21, w22 = wp[2, 0], wp[2, 1], wp[2, 2]
    for j in range(dst.shape[0]):
        k = j * sw
        dst[j] = (w00 * r0[k] + w01 * r0[k + 1] + w02 * r0[k + 2]
                  + w10 * r1[k] + w11 * r1[k + 1] + w12 * r1[k + 2]
                  + w20 * r2[k] + w21 * r2[k + 1] + w22 * r2[k + 2])


@jit(cache=True, inline="always")
def _nine_plane(out, buf, wp, r0, c0, sh, sw):
    """``_nine_row`` for every output row, windows from ``buf[r0 + i * sh, c0:]``, with
    the column stride (1 or 2) a constant so that the row loop vectorises."""
    for i in range(out.shape[0]):
        r = r0 + i * sh
        x0, x1, x2 = buf[r, c0:], buf[r + 1, c0:], buf[r + 2, c0:]
        if sw == 1:
            _nine_row(out[i], x0, x1, x2, wp, 1)
        else:
            _nine_row(out[i], x0, x1, x2, wp, 2)


@jit(cache=True, inline="always")
def _is_nine(geo):
    """True for the fused 3x3 path: a 3x3 window, no dilation, column stride 1 or 2."""
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    return kh == 3 and kw == 3 and dh == 1 and dw == 1 and (sw == 1 or sw == 2)


@jit(cache=True, inline="always")
def _wide_taps(acc, buf, wp, start, dh, dw):
    """Stride 1 on wide rows: ``acc[t] += sum_ab wp[a, b] * flat[start + t + a*dh*cols
    + b*dw]`` with ``flat`` the padded plane ``buf`` (cols wide) read as one row.  An
    output plane of Ho x Wo is then ``acc[i * cols + j]``: the junk columns between its
    rows cost a few sums, and each tap row is one long loop instead of Ho short ones (a
    7x7 map's rows are too short to vectorise)."""
    flat, cols = buf.reshape(buf.size), buf.shape[1]
    for a in range(wp.shape[0]):
        src = flat[start + a * dh * cols:]
        if dw == 1:
            _taps_row(acc, src, wp[a], 1, 1)
        else:
            _taps_row(acc, src, wp[a], 1, dw)


@jit(cache=True, inline="always")
def _unwiden(out, acc, cols):
    """``out[i, j] = acc[i * cols + j]``."""
    for i in range(out.shape[0]):
        row, src = out[i], acc[i * cols:]
        for j in range(out.shape[1]):
            row[j] = src[j]


@jit(cache=True, nogil=True)
def forward_planes(x, w, y, geo, first, stop):
    """Output planes ``p = n * O + o`` in [first, stop), summed row by row in ``y``."""
    N, C, H, W = x.shape
    O, Ho, Wo = w.shape[0], y.shape[2], y.shape[3]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    mult = O // C
    rows, cols = _buffer_shape(geo, (H, W), (Ho, Wo))
    buf = np.zeros((rows, cols), dtype=x.dtype)
    nine = _is_nine(geo)
    wide9 = nine and sh == 1 and sw == 1 and Wo < NINE_WIDE_BELOW
    wide = sh == 1 and sw == 1 and Wo >= WIDE_MIN and not nine
    acc = np.empty((Ho - 1) * cols + Wo if (wide or wide9) and Ho else 0, dtype=x.dtype)
    flat = buf.reshape(buf.size)       # the padded plane read as one row (wide9)
    filled = -1
    for p in range(first, stop):
        n, o = p // O, p % O
        src = n * C + o // mult
        if src != filled:
            _fill(buf, x[n, o // mult], ph, pw)
            filled = src
        if wide9:
            _nine_row(acc, flat, flat[cols:], flat[2 * cols:], w[o, 0], 1)
            _unwiden(y[n, o], acc, cols)
            continue
        if nine:
            _nine_plane(y[n, o], buf, w[o, 0], 0, 0, sh, sw)
            continue
        if wide:
            _zero(acc)
            _wide_taps(acc, buf, w[o, 0], 0, dh, dw)
            _unwiden(y[n, o], acc, cols)
            continue
        for i in range(Ho):
            _zero(y[n, o, i])
        _strided(y[n, o], buf, w[o, 0], 0, 0, sh, sw, dh, dw)


@jit(cache=True, inline="always")
def _scatter_row(dst, g, wr, sw, dw):
    """``dst[j * sw + b * dw] += wr[b] * g[j]`` for every tap ``b``: the adjoint of
    ``_taps_row``.  Three taps at stride 2 run as one pass: even columns take two taps,
    odd ones one."""
    n = g.shape[0]
    if wr.shape[0] == 3 and sw == 2 and dw == 1 and n > 0:
        w0, w1, w2 = wr[0], wr[1], wr[2]
        dst[0] += w0 * g[0]
        for j in range(1, n):
            dst[2 * j] += w0 * g[j] + w2 * g[j - 1]
        for j in range(n):
            dst[2 * j + 1] += w1 * g[j]
        dst[2 * n] += w2 * g[n - 1]
        return
    usw = uint64(sw)
    for b in range(wr.shape[0]):
        wb, off = wr[b], uint64(b * dw)
        for j in range(n):
            dst[off + uint64(j) * usw] += wb * g[j]


@jit(cache=True, inline="always")
def _scatter_plane(buf, gp, wp, sh, sw, dh, dw):
    """``_scatter_row`` for every row of the output-gradient plane ``gp``."""
    for i in range(gp.shape[0]):
        for a in range(wp.shape[0]):
            _scatter_row(buf[i * sh + a * dh], gp[i], wp[a], sw, dw)


@jit(cache=True, nogil=True)
def grad_input_planes(gy, w, wf, gx, geo, first, stop):
    """Input-gradient planes ``p = n * C + c`` in [first, stop).  Stride 1: gathered
    like the forward pass, from ``gy`` in a zero border with the flipped taps ``wf``;
    otherwise scattered into a padded buffer and cropped."""
    N, O, Ho, Wo = gy.shape
    C, H, W = gx.shape[1], gx.shape[2], gx.shape[3]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    mult = O // C
    eh, ew = (kh - 1) * dh, (kw - 1) * dw
    wide = W >= WIDE_MIN
    if sh == 1 and sw == 1:
        buf = np.zeros((max(H + ph, Ho) + eh, max(W + pw, Wo) + ew), dtype=gx.dtype)
        acc = np.empty((H - 1) * buf.shape[1] + W if H and wide else 0, dtype=gx.dtype)
    else:
        rows, cols = _buffer_shape(geo, (H, W), (Ho, Wo))
        buf = np.empty((rows, cols), dtype=gx.dtype)
    nine = _is_nine(geo) and mult == 1
    for p in range(first, stop):
        n, c = p // C, p % C
        if nine and sh == 1:            # the forward pass's nine taps, flipped
            _fill(buf, gy[n, c], eh, ew)
            _nine_plane(gx[n, c], buf, wf[c, 0], ph, pw, 1, 1)
            continue
        if sh == 1 and sw == 1:
            _zero(acc)
            if not wide:
                for i in range(H):
                    _zero(gx[n, c, i])
            for o in range(c * mult, (c + 1) * mult):
                _fill(buf, gy[n, o], eh, ew)
                if wide:
                    _wide_taps(acc, buf, wf[o, 0], ph * buf.shape[1] + pw, dh, dw)
                else:
                    _strided(gx[n, c], buf, wf[o, 0], ph, pw, 1, 1, dh, dw)
            if wide:
                _unwiden(gx[n, c], acc, buf.shape[1])
            continue
        buf[:, :] = 0
        for o in range(c * mult, (c + 1) * mult):
            if sw == 2 and dw == 1:          # literal strides, as in ``_strided``
                _scatter_plane(buf, gy[n, o], w[o, 0], sh, 2, dh, 1)
            else:
                _scatter_plane(buf, gy[n, o], w[o, 0], sh, sw, dh, dw)
        for i in range(H):
            _fill(gx[n, c, i:i + 1], buf[ph + i:ph + i + 1, pw:pw + W], 0, 0)


@jit(cache=True, inline="always")
def _dots_row(sums, a, g, xr, sw, dw, zero):
    """``sums[a, b] += sum_j g[j] * xr[j * sw + b * dw]`` for every tap ``b`` (each row's
    sum in the arrays' dtype, added to the float64 ``sums``)."""
    kw = sums.shape[1]
    if kw == 3 and dw == 1 and sw == 1:
        s0, s1, s2 = zero, zero, zero
        for j in range(g.shape[0]):
            v = g[j]
            s0 += v * xr[j]
            s1 += v * xr[j + 1]
            s2 += v * xr[j + 2]
        sums[a, 0] += s0
        sums[a, 1] += s1
        sums[a, 2] += s2
    else:
        usw = uint64(sw)
        for b in range(kw):
            s, off = zero, uint64(b * dw)
            for j in range(g.shape[0]):
                s += g[j] * xr[off + uint64(j) * usw]
            sums[a, b] += s


@jit(cache=True, inline="always")
def _plane_dots(sums, gp, buf, sh, sw, dh, dw, zero):
    """``_dots_row`` over every row of the output-gradient plane ``gp``."""
    for i in range(gp.shape[0]):
        for a in range(sums.shape[0]):
            _dots_row(sums, a, gp[i], buf[i * sh + a * dh], sw, dw, zero)


@jit(cache=True, nogil=True, fastmath=True)
def grad_weight_planes(x, gy, gw, geo, first, stop):
    """The weights of output channels ``o`` in [first, stop), summed over the batch."""
    N, C, H, W = x.shape
    O, Ho, Wo = gy.shape[1], gy.shape[2], gy.shape[3]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    mult = O // C
    rows, cols = _buffer_shape(geo, (H, W), (Ho, Wo))
    buf = np.zeros((rows, cols), dtype=x.dtype)
    sums = np.empty((kh, kw))
    zero = x.dtype.type(0)
    for o in range(first, stop):
        sums[:, :] = 0
        for n in range(N):
            _fill(buf, x[n, o // mult], ph, pw)
            if sw == 1 and dw == 1:           # literal strides, as in ``_strided``
                _plane_dots(sums, gy[n, o], buf, sh, 1, dh, 1, zero)
            elif sw == 2 and dw == 1:
                _plane_dots(sums, gy[n, o], buf, sh, 2, dh, 1, zero)
            else:
                _plane_dots(sums, gy[n, o], buf, sh, sw, dh, dw, zero)
        for a in range(kh):
            for b in range(kw):
                gw[o, 0, a, b] = sums[a, b]


@jit(cache=True, parallel=True)
def forward_nb(x, w, y, geo):
    planes = x.shape[0] * w.shape[0]
    chunks = min(planes, _CHUNKS)
    for k in prange(chunks):
        forward_planes(x, w, y, geo, k * planes // chunks, (k + 1) * planes // chunks)


@jit(cache=True, parallel=True)
def grad_input_nb(gy, w, wf, gx, geo):
    planes = gx.shape[0] * gx.shape[1]
    chunks = min(planes, _CHUNKS)
    for k in prange(chunks):
        grad_input_planes(gy, w, wf, gx, geo, k * planes // chunks, (k + 1) * planes // chunks)


@jit(cache=True, parallel=True)
def grad_weight_nb(x, gy, gw, geo):
    planes = gw.shape[0]
    chunks = min(planes, _CHUNKS)
    for k in prange(chunks):
        grad_weight_planes(x, gy, gw, geo, k * planes // chunks, (k + 1) * planes // chunks)


# ----- small maps: channels innermost -----------------------------------------------------
# On a 14x14 or 7x7 map a row is too short to vectorise and the per-plane set-up is most of
# the work.  The forward pass then runs channels-last: the batch is copied once into a
# zero-bordered (N, rows, cols, C) buffer, and each output row sums its taps as long
# loops over the channels, which vectorise (MobileNet's last layers have 384 to 960).

def channels_last(mult, out_width, geo=None):
    """True where the forward pass runs channels-last: one channel per input (the usual
    depthwise layer) and rows narrower than ``WIDE_MIN`` (``NINE_CL_BELOW`` for the
    3x3 stride-1 window of ``geo``, which the planes sum faster on wide rows)."""
    nine = geo is not None and tuple(geo[:4]) + tuple(geo[6:]) == (3, 3, 1, 1, 1, 1)
    return mult == 1 and out_width < (NINE_CL_BELOW if nine else WIDE_MIN)


@jit(cache=True, nogil=True)
def fill_channels_last(x, xb, ph, pw):
    """``xb[n, ph + i, pw + j, c] = x[n, c, i, j]`` (the border of ``xb`` is left zero)."""
    N, C, H, W = x.shape
    for n in range(N):
        for i in range(H):
            for j in range(W):
                dst = xb[n, ph + i, pw + j]
                for c in range(C):
                    dst[c] = x[n, c, i, j]


@jit(cache=True, inline="always")
def _nine(dst, wt, x0, x1, x2, x3, x4, x5, x6, x7, x8):
    """``dst[c] = sum_t wt[t, c] * x_t[c]`` over the nine taps of a 3x3 window."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = (wt[0], wt[1], wt[2], wt[3], wt[4], wt[5], wt[6],
                                          wt[7], wt[8])
    for c in range(dst.shape[0]):
        dst[c] = (w0[c] * x0[c] + w1[c] * x1[c] + w2[c] * x2[c] + w3[c] * x3[c]
                  + w4[c] * x4[c] + w5[c] * x5[c] + w6[c] * x6[c] + w7[c] * x7[c]
                  + w8[c] * x8[c])


@jit(cache=True, nogil=True)
def forward_rows_cl(xb, wt, y, geo, first, stop):
    """Output rows ``u = n * Ho + i`` in [first, stop) from the channels-last buffer
    ``xb`` and the taps ``wt`` (kh * kw, C)."""
    C = xb.shape[3]
    Ho, Wo = y.shape[2], y.shape[3]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    acc = np.empty((Wo, C), dtype=y.dtype)
    for u in range(first, stop):
        n, i = u // Ho, u % Ho
        if kh == 3 and kw == 3:
            r0, r1, r2 = i * sh, i * sh + dh, i * sh + 2 * dh
            for j in range(Wo):         # nine taps summed in registers, one store
                q0, q1, q2 = j * sw, j * sw + dw, j * sw + 2 * dw
                _nine(acc[j], wt, xb[n, r0, q0], xb[n, r0, q1], xb[n, r0, q2],
                      xb[n, r1, q0], xb[n, r1, q1], xb[n, r1, q2],
                      xb[n, r2, q0], xb[n, r2, q1], xb[n, r2, q2])
        else:
            for j in range(Wo):
                _zero(acc[j])
            for a in range(kh):
                r = i * sh + a * dh
                for b in range(kw):
                    wr = wt[a * kw + b]
                    for j in range(Wo):     # 1-D rows: the channel loops vectorise
                        dst, src = acc[j], xb[n, r, j * sw + b * dw]
                        for c in range(C):
                            dst[c] += wr[c] * src[c]
        for c in range(C):
            for j in range(Wo):
                y[n, c, i, j] = acc[j, c]


@jit(cache=True, parallel=True)
def forward_rows_cl_nb(xb, wt, y, geo):
    units = y.shape[0] * y.shape[2]
    chunks = min(units, _CHUNKS)
    for k in prange(chunks):
        forward_rows_cl(xb, wt, y, geo, k * units // chunks, (k + 1) * units // chunks)


def _forward_channels_last(x, w, y, geo):
    """The channels-last forward pass (arrays already checked)."""
    n, c = x.shape[:2]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    rows = max((y.shape[2] - 1) * sh + (kh - 1) * dh + 1, ph + x.shape[2])
    cols = max((y.shape[3] - 1) * sw + (kw - 1) * dw + 1, pw + x.shape[3])
    xb = np.zeros((n, rows, cols, c), dtype=x.dtype)
    fill_channels_last(x, xb, ph, pw)
    taps = np.ascontiguousarray(w.reshape(c, kh * kw).T)
    launch(forward_rows_cl_nb, forward_rows_cl, _work(y, geo), n * y.shape[2], xb, taps, y,
           geo, min_part=_min_part())
    return y


# ----- argument checks and wrappers ------------------------------------------------------

def check_depthwise(op, x, w, y, geo):
    """Check one product's arrays in their roles -- input ``x`` (N, C, H, W), weight ``w``
    (O, 1, kh, kw) with O a multiple of C, output ``y`` (N, O, Ho, Wo) -- against the
    geometry before a kernel indexes them unchecked.  Returns ``geo`` as ints."""
    argcheck.arrays(op, x=x, w=w, y=y)
    for name, a in (("x", x), ("w", w), ("y", y)):
        argcheck.ndim_is(op, name, a, 4)
        argcheck.floats(op, name, a)
        argcheck.dtype_is(op, name, a, x.dtype)
    geo = argcheck.ints(op, "geo", geo, 8)
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    if c == 0 or o % c or w.shape[1] != 1 or y.shape[:2] != (n, o) or w.shape[2:] != geo[:2]:
        raise ValueError(f"{op}: shapes do not agree: input {x.shape}, weight {w.shape} "
                         f"and output {y.shape} with kernel {geo[:2]} (expected input "
                         "(N, C, H, W), weight (O, 1, kh, kw) with O a multiple of C, "
                         "output (N, O, Ho, Wo))")
    argcheck.windows(op, x.shape[2:], y.shape[2:], geo[:2], geo[2:4], geo[4:6], geo[6:8])
    return geo


def _work(y, geo):
    return y.size * geo[0] * geo[1]


def _min_part():
    """Work (multiply-adds) per part of a split on the worker threads: a multiply-add
    costs about a quarter of a gathered element."""
    return 4 * policy.gather_min_part_items


def depthwise_forward_numba(x, w, y, geo):
    geo = check_depthwise("depthwise_forward_numba", x, w, y, geo)
    if channels_last(w.shape[0] // x.shape[1], y.shape[3], geo):
        return _forward_channels_last(x, w, y, geo)
    launch(forward_nb, forward_planes, _work(y, geo), y.shape[0] * y.shape[1], x, w, y, geo,
           min_part=_min_part())
    return y


def depthwise_grad_input_numba(gy, w, gx, geo):
    geo = check_depthwise("depthwise_grad_input_numba", gx, w, gy, geo)
    flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1])
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    eh, ew = (kh - 1) * dh, (kw - 1) * dw
    if (sh == sw == 1 and eh >= ph and ew >= pw
            and channels_last(w.shape[0] // gx.shape[1], gx.shape[3])):
        # stride 1: the forward pass of gy with the flipped taps, padded by the rest
        return _forward_channels_last(gy, flipped, gx, (kh, kw, 1, 1, eh - ph, ew - pw, dh, dw))
    launch(grad_input_nb, grad_input_planes, _work(gy, geo), gx.shape[0] * gx.shape[1],
           gy, w, flipped, gx, geo, min_part=_min_part())
    return gx


def depthwise_grad_weight_numba(x, gy, gw, geo):
    geo = check_depthwise("depthwise_grad_weight_numba", x, gw, gy, geo)
    launch(grad_weight_nb, grad_weight_planes, _work(gy, geo), gw.shape[0], x, gy, gw, geo,
           min_part=_min_part())
    return gw


# ----- dispatch (``use_numba`` as in ``im2col``: None asks ``kernels.enabled``) ---------

def depthwise_forward(x, w, y, geo, use_numba=None):
    """``y`` (any contents; fully written)."""
    fast = use_kernel(x, use_numba)
    return (depthwise_forward_numba if fast else depthwise_forward_ref)(x, w, y, geo)


def depthwise_grad_input(gy, w, gx, geo, use_numba=None):
    """``gx`` (any contents; fully written)."""
    fast = use_kernel(gy, use_numba)
    return (depthwise_grad_input_numba if fast else depthwise_grad_input_ref)(gy, w, gx, geo)


def depthwise_grad_weight(x, gy, gw, geo, use_numba=None):
    """``gw`` (any contents; fully written)."""
    fast = use_kernel(x, use_numba)
    return (depthwise_grad_weight_numba if fast else depthwise_grad_weight_ref)(x, gy, gw, geo)
