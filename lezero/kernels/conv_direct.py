"""Direct 2-D convolution kernels: a loop over the kernel taps, no patch matrix.

For layers with few channels (LeNet's 1->6 and 6->16, depthwise layers) the GEMM of the
im2col method is tiny and the patch matrix is the whole cost; here each output plane is
accumulated in a small buffer that stays in L1 while every (input channel, tap) adds one
shifted, scaled copy of an input plane.  The three products:

    direct_forward      y[n, o]            += w[o, c, a, b] * x[n, c] shifted by tap (a, b)
    direct_grad_input   gx[n, c]           += w[o, c, a, b] * gy[n, o] shifted back
    direct_grad_weight  gw[o, c, a, b]      = sum_n <gy[n, o], x[n, c] shifted>

With stride 1, dilation 1 and no padding (``wide``: LeNet's layers) the kernels work on
*wide* rows: an output plane is summed as Ho rows of the input's width W, of which the
last W - Wo columns are junk, so that each (input channel, tap) adds one contiguous run
of the flat input plane -- one long vectorised loop instead of Ho short ones (LeNet's
first layer: 25 taps x 892 elements per plane against 25 x 28 rows of 28).  The backward
products read ``gy`` widened the same way, with zeros in the junk columns, so that what
wraps around a row edge adds nothing.

Arrays are 4-D (N, C, H, W); ``geo`` is (kh, kw, sh, sw, ph, pw, dh, dw) with ``ph, pw``
the low padding, and the output size comes from ``y``/``gy``.  Planes are enumerated
channel-major (``o * N + n``); the serial ``*_planes`` functions release the GIL.
``direct_*_ref`` are the NumPy references (one strided slice per tap).
"""
import numpy as np

from lezero.kernels import argcheck, jit, prange
from lezero.runtime import launch
from lezero.kernels.im2col import _valid_range, _valid_range_nb, use_kernel


# ----- NumPy references ------------------------------------------------------------------

def _tap_slices(geo, out_hw, in_hw):
    """Per tap: (a, b, output slices, input slices) of the in-range part."""
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    for a in range(kh):
        r0, r1 = _valid_range(out_hw[0], sh, a * dh - ph, in_hw[0])
        for b in range(kw):
            c0, c1 = _valid_range(out_hw[1], sw, b * dw - pw, in_hw[1])
            if r1 <= r0 or c1 <= c0:
                continue
            ys = (slice(r0, r1), slice(c0, c1))
            xs = (slice(r0 * sh + a * dh - ph, (r1 - 1) * sh + a * dh - ph + 1, sh),
                  slice(c0 * sw + b * dw - pw, (c1 - 1) * sw + b * dw - pw + 1, sw))
            yield a, b, ys, xs


def _flat(a, n, groups, per_group):
    """(n, groups * per_group, r, q) -> (n, groups, per_group, r * q), empty batches too."""
    return a.reshape(n, groups, per_group, a.shape[2] * a.shape[3])


def direct_forward_ref(x, w, y, geo, groups):
    """``y`` (zeroed) += the convolution of ``x`` with ``w``; NumPy/CuPy."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    og = o // groups
    for a, b, ys, xs in _tap_slices(geo, y.shape[2:], x.shape[2:]):
        xt = _flat(x[(Ellipsis,) + xs], n, groups, cg)
        wt = w[:, :, a, b].reshape(groups, og, cg)
        y[(Ellipsis,) + ys] += (wt @ xt).reshape((n, o) + y[(Ellipsis,) + ys].shape[2:])
    return y


def direct_grad_input_ref(gy, w, gx, geo, groups):
    """``gx`` (zeroed) += the transposed convolution of ``gy`` with ``w``."""
    n, o = gy.shape[:2]
    c, cg = gx.shape[1], w.shape[1]
    og = o // groups
    for a, b, ys, xs in _tap_slices(geo, gy.shape[2:], gx.shape[2:]):
        gt = _flat(gy[(Ellipsis,) + ys], n, groups, og)
        wt = w[:, :, a, b].reshape(groups, og, cg).transpose(0, 2, 1)
        gx[(Ellipsis,) + xs] += (wt @ gt).reshape((n, c) + gx[(Ellipsis,) + xs].shape[2:])
    return gx


def direct_grad_weight_ref(x, gy, gw, geo, groups):
    """``gw`` (zeroed) += the weight gradient from ``x`` and ``gy``."""
    n = x.shape[0]
    o, cg = gw.shape[:2]
    og = o // groups
    for a, b, ys, xs in _tap_slices(geo, gy.shape[2:], x.shape[2:]):
        xt = _flat(x[(Ellipsis,) + xs], n, groups, cg)
        gt = _flat(gy[(Ellipsis,) + ys], n, groups, og)
        gw[:, :, a, b] += (gt @ xt.transpose(0, 1, 3, 2)).sum(axis=0).reshape(o, cg)
    return gw


# ----- Numba kernels ---------------------------------------------------------------------

@jit(cache=True, inline="always")
def _axpy(dst, src, a):
    """dst += a * src over 1-D rows (inlined, so each call site keeps its row's layout:
    a contiguous slice types as such and the loop vectorises)."""
    for j in range(dst.shape[0]):
        dst[j] += a * src[j]


@jit(cache=True, inline="always")
def _dot(u, v):
    total = 0.0
    for j in range(u.shape[0]):
        total += u[j] * v[j]
    return total


@jit(cache=True, nogil=True)
def forward_planes(x, w, y, geo, groups, first, stop):
    """Output planes ``o * N + n`` in [first, stop), each summed in an L1 buffer."""
    N, C, H, W = x.shape
    O, cg = w.shape[0], w.shape[1]
    Ho, Wo = y.shape[2], y.shape[3]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    og = O // groups
    acc = np.empty((Ho, Wo), dtype=y.dtype)
    for p in range(first, stop):
        o = p // N
        n = p - o * N
        c0 = (o // og) * cg
        acc[:, :] = 0
        for ci in range(cg):
            for a in range(kh):
                r0, r1 = _valid_range_nb(Ho, sh, a * dh - ph, H)
                for b in range(kw):
                    q0, q1 = _valid_range_nb(Wo, sw, b * dw - pw, W)
                    wv = w[o, ci, a, b]
                    off = b * dw - pw
                    for oh in range(r0, r1):
                        # row views: plain 1-D loops that LLVM vectorises (2-D
                        # indexing with a possibly negative offset does not)
                        dst = acc[oh, q0:q1]
                        ih = oh * sh + a * dh - ph
                        if sw == 1:     # a contiguous slice types as such: it vectorises
                            _axpy(dst, x[n, c0 + ci, ih, q0 + off:q1 + off], wv)
                        else:
                            _axpy(dst, x[n, c0 + ci, ih, q0 * sw + off:(q1 - 1) * sw + off + 1:sw],
                                  wv)
        y[n, o, :, :] = acc

@jit(cache=True, parallel=True)
def forward_nb(x, w, y, geo, groups):
    for p in prange(w.shape[0] * x.shape[0]):
        forward_planes(x, w, y, geo, groups, p, p + 1)

@jit(cache=True, nogil=True)
def grad_input_planes(gy, w, gx, geo, groups, first, stop):
    """Input-gradient planes ``c * N + n`` in [first, stop)."""
    N, O, Ho, Wo = gy.shape
    H, W = gx.shape[2], gx.shape[3]
    cg = w.shape[1]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    og = O // groups
    acc = np.empty((H, W), dtype=gx.dtype)
    for p in range(first, stop):
        c = p // N
        n = p - c * N
        g = c // cg
        ci = c - g * cg
        acc[:, :] = 0
        for oi in range(og):
            o = g * og + oi
            for a in range(kh):
                r0, r1 = _valid_range_nb(Ho, sh, a * dh - ph, H)
                for b in range(kw):
                    q0, q1 = _valid_range_nb(Wo, sw, b * dw - pw, W)
                    wv = w[o, ci, a, b]
                    off = b * dw - pw
                    for oh in range(r0, r1):
                        src = gy[n, o, oh, q0:q1]
                        ih = oh * sh + a * dh - ph
                        if sw == 1:
                            _axpy(acc[ih, q0 + off:q1 + off], src, wv)
                        else:
                            _axpy(acc[ih, q0 * sw + off:(q1 - 1) * sw + off + 1:sw], src, wv)
        gx[n, c, :, :] = acc

@jit(cache=True, parallel=True)
def grad_input_nb(gy, w, gx, geo, groups):
    for p in prange(gx.shape[1] * gy.shape[0]):
        grad_input_planes(gy, w, gx, geo, groups, p, p + 1)

@jit(cache=True, nogil=True, fastmath=True)
def grad_weight_planes(x, gy, gw, geo, groups, first, stop):
    """Weight entries of the (o, c) pairs ``o * cg + ci`` in [first, stop): dot
    products over the batch and the output plane (fastmath lets them vectorize)."""
    N, C, H, W = x.shape
    O, Ho, Wo = gy.shape[1], gy.shape[2], gy.shape[3]
    cg = gw.shape[1]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    og = O // groups
    for p in range(first, stop):
        o = p // cg
        ci = p - o * cg
        c = (o // og) * cg + ci
        for a in range(kh):
            r0, r1 = _valid_range_nb(Ho, sh, a * dh - ph, H)
            for b in range(kw):
                q0, q1 = _valid_range_nb(Wo, sw, b * dw - pw, W)
                off = b * dw - pw
                total = 0.0
                for n in range(N):
                    for oh in range(r0, r1):
                        g_row = gy[n, o, oh, q0:q1]
                        ih = oh * sh + a * dh - ph
                        if sw == 1:
                            total += _dot(g_row, x[n, c, ih, q0 + off:q1 + off])
                        else:
                            x_row = x[n, c, ih, q0 * sw + off:(q1 - 1) * sw + off + 1:sw]
                            total += _dot(g_row, x_row)
                gw[o, ci, a, b] += total

@jit(cache=True, parallel=True)
def grad_weight_nb(x, gy, gw, geo, groups):
    for p in prange(gw.shape[0] * gw.shape[1]):
        grad_weight_planes(x, gy, gw, geo, groups, p, p + 1)


# ----- wide rows (stride 1, dilation 1, no padding) ---------------------------------------

def wide(geo, in_hw, out_hw):
    """Whether the wide-row kernels apply: stride 1, dilation 1, no padding, and the
    output of the valid size ``in - k + 1`` (an even kernel's "same" padding pads only
    the high side: its rows run past the input, so it takes the general kernels)."""
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    return (sh == sw == dh == dw == 1 and ph == pw == 0 and out_hw[0] == in_hw[0] - kh + 1
            and out_hw[1] == in_hw[1] - kw + 1)


def widen(gy, width):
    """``gy`` (N, O, Ho, Wo) on rows of ``width`` columns, zeros in the extra ones."""
    out = np.zeros(gy.shape[:3] + (width,), dtype=gy.dtype)
    out[..., :gy.shape[3]] = gy
    return out


@jit(cache=True, inline="always")
def _dot_in(u, v, zero):
    """The dot product of two rows accumulated in ``zero``'s type (float32 rows: float32
    sums, twice the vector width of float64 ones)."""
    total = zero
    for j in range(u.shape[0]):
        total += u[j] * v[j]
    return total


def pair_step(out_channels, groups):
    """How many output channels one unit of the wide forward sums at once: 2 when the
    channels of each group pair up (they then share every load of the input), else 1."""
    return 2 if (out_channels // groups) % 2 == 0 else 1


@jit(cache=True, inline="always")
def _tap_row2(h0, h1, xr, w0, w1):
    """``h0[j] += sum_b w0[b] * xr[j + b]`` and the same for ``h1`` with ``w1``: one row
    of taps for two output channels.  Rows of 3 and 5 taps are unrolled, so each input
    element is loaded once for all ten (or six) multiply-adds and each sum is stored once
    per row instead of once per tap: the loop is bound by the FMA units, not by loads and
    stores (docs/performance.md)."""
    n, kw = h0.shape[0], w0.shape[0]
    if kw == 5:
        a0, a1, a2, a3, a4 = w0[0], w0[1], w0[2], w0[3], w0[4]
        b0, b1, b2, b3, b4 = w1[0], w1[1], w1[2], w1[3], w1[4]
        for j in range(n):
            x0, x1, x2, x3, x4 = xr[j], xr[j + 1], xr[j + 2], xr[j + 3], xr[j + 4]
            h0[j] += a0 * x0 + a1 * x1 + a2 * x2 + a3 * x3 + a4 * x4
            h1[j] += b0 * x0 + b1 * x1 + b2 * x2 + b3 * x3 + b4 * x4
    elif kw == 3:
        a0, a1, a2, b0, b1, b2 = w0[0], w0[1], w0[2], w1[0], w1[1], w1[2]
        for j in range(n):
            x0, x1, x2 = xr[j], xr[j + 1], xr[j + 2]
            h0[j] += a0 * x0 + a1 * x1 + a2 * x2
            h1[j] += b0 * x0 + b1 * x1 + b2 * x2
    else:
        for b in range(kw):
            _axpy(h0, xr[b:b + n], w0[b])
            _axpy(h1, xr[b:b + n], w1[b])


@jit(cache=True, nogil=True)
def forward_wide_planes(x, w, y, groups, step, first, stop):
    """Units ``u`` in [first, stop), summed on wide rows: output channels ``o`` to
    ``o + step - 1`` (``step`` from ``pair_step``) of sample ``n``, with
    ``u = (o // step) * N + n``."""
    N, C, H, W = x.shape
    O, cg, kh, kw = w.shape
    Ho, Wo = y.shape[2], y.shape[3]
    L = (Ho - 1) * W + Wo                  # the flat run from the first to the last output
    og = O // groups
    acc = np.empty((2, Ho * W), dtype=y.dtype)
    for u in range(first, stop):
        o = (u // N) * step
        n = u - (u // N) * N
        c0 = (o // og) * cg
        acc[:, :] = 0
        h0, h1 = acc[0, :L], acc[1, :L]
        for ci in range(cg):
            xf = x[n, c0 + ci].reshape(H * W)
            for a in range(kh):
                xr = xf[a * W:a * W + L + kw - 1]
                if step == 2:
                    _tap_row2(h0, h1, xr, w[o, ci, a], w[o + 1, ci, a])
                else:
                    for b in range(kw):
                        _axpy(h0, xr[b:b + L], w[o, ci, a, b])
        for k in range(step):
            for i in range(Ho):
                y[n, o + k, i, :] = acc[k, i * W:i * W + Wo]


@jit(cache=True, parallel=True)
def forward_wide_nb(x, w, y, groups, step):
    for u in prange((w.shape[0] // step) * x.shape[0]):
        forward_wide_planes(x, w, y, groups, step, u, u + 1)


@jit(cache=True, nogil=True)
def grad_input_wide_planes(gyw, w, gx, groups, first, stop):
    """Input-gradient planes ``c * N + n`` in [first, stop) from the widened ``gyw``."""
    N, O, Ho, W = gyw.shape
    H, Wo = gx.shape[2], W - w.shape[3] + 1
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    L = (Ho - 1) * W + Wo
    og = O // groups
    acc = np.empty(H * W, dtype=gx.dtype)
    for p in range(first, stop):
        c = p // N
        n = p - c * N
        g = c // cg
        ci = c - g * cg
        acc[:] = 0
        for oi in range(og):
            o = g * og + oi
            gf = gyw[n, o].reshape(Ho * W)[:L]
            for a in range(kh):
                for b in range(kw):
                    start = a * W + b
                    _axpy(acc[start:start + L], gf, w[o, ci, a, b])
        gx[n, c, :, :] = acc.reshape(H, W)


@jit(cache=True, parallel=True)
def grad_input_wide_nb(gyw, w, gx, groups):
    for p in prange(gx.shape[1] * gyw.shape[0]):
        grad_input_wide_planes(gyw, w, gx, groups, p, p + 1)


@jit(cache=True, nogil=True, fastmath=True)
def grad_weight_wide_planes(x, gyw, gw, groups, first, stop):
    """Weight entries of the (o, c) pairs ``o * cg + ci`` in [first, stop): one dot
    product per sample and tap, over the widened ``gyw`` (fastmath: they vectorise)."""
    N, C, H, W = x.shape
    O, Ho = gyw.shape[1], gyw.shape[2]
    cg, kh, kw = gw.shape[1], gw.shape[2], gw.shape[3]
    L = (Ho - 1) * W + W - kw + 1
    og = O // groups
    zero = x.dtype.type(0)
    xs, gs = x.reshape(N, C, H * W), gyw.reshape(N, O, Ho * W)
    sums = np.empty(kh * kw)           # per tap: float64 over the batch
    for p in range(first, stop):
        o = p // cg
        ci = p - o * cg
        c = (o // og) * cg + ci
        sums[:] = 0
        for n in range(N):
            g, xf = gs[n, o, :L], xs[n, c]
            for a in range(kh):
                for b in range(kw):
                    start = a * W + b          # one row's sum in x's dtype
                    sums[a * kw + b] += _dot_in(g, xf[start:start + L], zero)
        for a in range(kh):
            for b in range(kw):
                gw[o, ci, a, b] += sums[a * kw + b]


@jit(cache=True, parallel=True)
def grad_weight_wide_nb(x, gyw, gw, groups):
    for p in prange(gw.shape[0] * gw.shape[1]):
        grad_weight_wide_planes(x, gyw, gw, groups, p, p + 1)


def check_direct(op, x, w, y, geo, groups):
    """Check one product's arrays in their roles -- input ``x`` (N, C, H, W), weight ``w``
    (O, C / groups, kh, kw), output ``y`` (N, O, Ho, Wo), whichever of them is the result
    -- against the geometry, before a kernel indexes them unchecked.  Returns ``geo`` as a
    tuple of ints."""
    argcheck.arrays(op, x=x, w=w, y=y)
    if not (x.ndim == w.ndim == y.ndim == 4 and x.dtype.kind == "f"
            and x.dtype == w.dtype == y.dtype):          # one test for the common case
        for name, a in (("x", x), ("w", w), ("y", y)):
            argcheck.ndim_is(op, name, a, 4)
            argcheck.floats(op, name, a)
            argcheck.dtype_is(op, name, a, x.dtype)
    (groups,) = argcheck.ints(op, "groups", (groups,), 1, low=1)
    geo = argcheck.ints(op, "geo", geo, 8)
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    if o % groups or c != w.shape[1] * groups or y.shape[:2] != (n, o) \
            or w.shape[2:] != geo[:2]:
        raise ValueError(f"{op}: shapes do not agree: input {x.shape}, weight {w.shape} "
                         f"and output {y.shape} with groups={groups} and kernel {geo[:2]} "
                         "(expected input (N, C, H, W), weight (O, C / groups, kh, kw), "
                         "output (N, O, Ho, Wo), O divisible by groups)")
    argcheck.windows(op, x.shape[2:], y.shape[2:], geo[:2], geo[2:4], geo[4:6], geo[6:8])
    return geo


def direct_forward_numba(x, w, y, geo, groups):
    geo = check_direct("direct_forward_numba", x, w, y, geo, groups)
    work, planes = y.size * w.shape[1] * geo[0] * geo[1], w.shape[0] * x.shape[0]
    if wide(geo, x.shape[2:], y.shape[2:]):
        step = pair_step(w.shape[0], groups)
        launch(forward_wide_nb, forward_wide_planes, work, planes // step,
               np.ascontiguousarray(x), w, y, groups, step)
    else:
        launch(forward_nb, forward_planes, work, planes, x, w, y, geo, groups)
    return y


def direct_grad_input_numba(gy, w, gx, geo, groups):
    geo = check_direct("direct_grad_input_numba", gx, w, gy, geo, groups)
    work, planes = gy.size * w.shape[1] * geo[0] * geo[1], gx.shape[1] * gy.shape[0]
    if wide(geo, gx.shape[2:], gy.shape[2:]):
        launch(grad_input_wide_nb, grad_input_wide_planes, work, planes,
               widen(gy, gx.shape[3]), w, gx, groups)
    else:
        launch(grad_input_nb, grad_input_planes, work, planes, gy, w, gx, geo, groups)
    return gx


def direct_grad_weight_numba(x, gy, gw, geo, groups):
    geo = check_direct("direct_grad_weight_numba", x, gw, gy, geo, groups)
    work, planes = gy.size * gw.shape[1] * geo[0] * geo[1], gw.shape[0] * gw.shape[1]
    if wide(geo, x.shape[2:], gy.shape[2:]):
        launch(grad_weight_wide_nb, grad_weight_wide_planes, work, planes,
               np.ascontiguousarray(x), widen(gy, x.shape[3]), gw, groups)
    else:
        launch(grad_weight_nb, grad_weight_planes, work, planes, x, gy, gw, geo, groups)
    return gw


# ----- dispatch (``use_numba`` as in ``im2col``: None asks ``kernels.enabled``) ---------

def direct_forward(x, w, y, geo, groups, use_numba=None):
    """``y`` (any contents; fully written by the kernel, zeroed for the reference)."""
    if use_kernel(x, use_numba):
        return direct_forward_numba(x, w, y, geo, groups)
    y[...] = 0
    return direct_forward_ref(x, w, y, geo, groups)


def direct_grad_input(gy, w, gx, geo, groups, use_numba=None):
    """``gx`` (fully written; zeroed for the reference)."""
    if use_kernel(gy, use_numba):
        return direct_grad_input_numba(gy, w, gx, geo, groups)
    gx[...] = 0
    return direct_grad_input_ref(gy, w, gx, geo, groups)


def direct_grad_weight(x, gy, gw, geo, groups, use_numba=None):
    """``gw`` must be zeroed by the caller."""
    fn = direct_grad_weight_numba if use_kernel(x, use_numba) else direct_grad_weight_ref
    return fn(x, gy, gw, geo, groups)
