"""The fast INT8 path: uint8 activations kept channels-last (NHWC) between layers, and
products on VNNI (``lezero.kernels.int8_gemm``) with the requantization in their epilogue.

A converted layer's output is a (N, C, H, W) *view* of an NHWC array, so the next
convolution reads it in place: no patch matrix, the kernel walks each output pixel's
window (runs of C contiguous bytes per tap).  Only a padded convolution copies its input,
once, into a zero-point-filled NHWC frame (about the input's size, against KH*KW times it
for im2col).  Padding reads as the input's zero point (the real 0), and
``int8_gemm.bias_for`` removes ``z_x * sum(w)``: the integers are those of
``reference`` (the tests compare them bit for bit).  Max pooling runs on the same layout.

``usable`` says when this path applies: a CPU target with VNNI, NumPy arrays, uint8
input, int8 weights with zero point 0 (the default symmetric qconfig), one group.
Elsewhere ``ops`` keeps the int16 kernels (``kernels.py``), which run on any CPU.  Where
MKL is available (``mkl_int8.usable``), the products run on its integer GEMM in blocks of
patch rows instead -- same layout in and out, same integers.
"""
import numpy as np
from numba import njit

from lezero import runtime
from lezero.kernels import argcheck, int8_gemm
from lezero.quantization import mkl_int8

__all__ = ["packable", "usable", "pack_conv", "nhwc_view", "conv2d", "linear", "max_pool", "is_nhwc"]

_OPTS = dict(cache=True, error_model="numpy", nogil=True)


def packable(weight, w_zp, groups=1):
    """True when the VNNI kernels can take these weights: a CPU target with VNNI, int8
    NumPy weights with zero point 0, one group."""
    return (int8_gemm.ISA is not None and type(weight) is np.ndarray
            and weight.dtype == np.int8 and groups == 1 and not np.any(w_zp))


def usable(x, weight, w_zp, groups=1):
    """True when the VNNI path computes this layer for the input ``x`` (uint8 NumPy)."""
    return type(x) is np.ndarray and x.dtype == np.uint8 and packable(weight, w_zp, groups)


def pack_conv(weight):
    """int8 weights (O, C, KH, KW) or (O, K) packed for ``int8_gemm``, taps channels
    last as the NHWC input is read."""
    w = weight.transpose(0, 2, 3, 1) if weight.ndim == 4 else weight
    return int8_gemm.pack(np.ascontiguousarray(w))


def is_nhwc(x):
    """True when the (N, C, H, W) array ``x`` is a view of a C-contiguous NHWC array."""
    return x.ndim == 4 and x.transpose(0, 2, 3, 1).flags.c_contiguous


def nhwc_view(y, n, oh, ow):
    """The (N*OH*OW, C) result of a product as the (N, C, OH, OW) view layers pass on."""
    return y.reshape(n, oh, ow, y.shape[1]).transpose(0, 3, 1, 2)


def _padded(x, zp, geo, cp, dtype):
    """``x`` (N, C, H, W) as the contiguous NHWC array of ``dtype`` the kernel reads:
    padded with the zero point (the real 0) to cover every window, channels to ``cp``
    (they meet zero weights).  Free when ``x`` is already an unpadded NHWC view with
    ``cp`` channels and that dtype."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    n, c, h, w = x.shape
    xh = x.transpose(0, 2, 3, 1)
    hp = max(h + 2 * ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + 2 * pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    if (hp, wp, cp) == (h, w, c):
        return np.ascontiguousarray(xh, dtype=dtype)
    out = np.full((n, hp, wp, cp), zp, dtype)
    out[:, ph:ph + h, pw:pw + w, :c] = xh
    return out


def conv2d(x, x_zp, geo, packed, bias_q, m, shift, zp, lo, hi, dtype):
    """The quantized convolution of uint8 ``x`` (N, C, H, W), any layout, with weights
    packed by ``pack_conv``; returns the (N, O, OH, OW) NHWC view."""
    op = "nhwc.conv2d"
    argcheck.arrays(op, x=x)
    argcheck.ndim_is(op, "x", x, 4)
    argcheck.dtype_is(op, "x", x, np.uint8)
    geo = argcheck.ints(op, "geo", geo, 10)
    argcheck.windows(op, x.shape[2:], geo[8:10], geo[0:2], geo[2:4], geo[4:6], geo[6:8])
    if (x.shape[1], geo[0] * geo[1]) != (packed.c, packed.taps):
        raise ValueError(f"{op}: the weights take {packed.c} channels and {packed.taps} "
                         f"taps, got x {x.shape} and a {geo[0]}x{geo[1]} window")
    plain = geo[:4] + (0, 0) + geo[6:]

    def on_mkl():                       # MKL's AMX/VNNI GEMM, in blocks of patch rows
        xp = _padded(x, x_zp, geo, packed.cp, np.uint8)
        return mkl_int8.conv2d(xp, plain, packed, bias_q, x_zp, m, shift, zp, lo, hi, dtype)

    def on_vnni():
        xp = _padded(x, x_zp, geo, packed.cp, int8_gemm.DTYPES[0])
        return int8_gemm.conv_requant(xp, plain, packed,
                                      int8_gemm.bias_for(packed, bias_q, x_zp), m, shift,
                                      zp, lo, hi, dtype)
    y = _run(packed, on_mkl, on_vnni, x.shape[0] * geo[8] * geo[9])
    return nhwc_view(y, x.shape[0], geo[8], geo[9])


def _run(packed, on_mkl, on_vnni, rows):
    """The layer's product the way ``mkl_int8.choose`` says, timed for it (per row)."""
    way, chooser = mkl_int8.choose(packed)
    run = on_mkl if way == "mkl" else on_vnni
    return run() if chooser is None else chooser.timed(way, run, max(rows, 1))


def linear(x2d, x_zp, packed, bias_q, m, shift, zp, lo, hi, dtype):
    """A quantized Linear on uint8 rows (M, K): (M, O)."""
    argcheck.arrays("nhwc.linear", x=x2d)
    argcheck.ndim_is("nhwc.linear", "x", x2d, 2)
    if (packed.taps, packed.c) != (1, x2d.shape[1]):
        raise ValueError(f"nhwc.linear: x must have {packed.c} features, got {x2d.shape}")

    def rows_of(dtype_a):
        if packed.cp == packed.c:
            return np.ascontiguousarray(x2d, dtype=dtype_a)
        a = np.zeros((x2d.shape[0], packed.cp), dtype_a)
        a[:, :packed.c] = x2d
        return a

    def on_mkl():
        return mkl_int8.linear(rows_of(np.uint8), packed, bias_q, x_zp, m, shift, zp, lo,
                               hi, dtype)

    def on_vnni():
        return int8_gemm.gemm_requant(rows_of(int8_gemm.DTYPES[0]), packed,
                                      int8_gemm.bias_for(packed, bias_q, x_zp), m, shift,
                                      zp, lo, hi, dtype)
    return _run(packed, on_mkl, on_vnni, x2d.shape[0])


@njit(**_OPTS)
def _max_pool(x, kh, kw, sh, sw, ph, pw, dh, dw, out, p0, p1):
    """Output rows ``p0 <= p < p1`` (of N*OH) of the NHWC max pooling."""
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for p in range(p0, p1):
        b, r = p // oh, p % oh
        for q in range(ow):
            for ch in range(c):
                out[b, r, q, ch] = 0
            for i in range(kh):
                y = r * sh - ph + i * dh
                if 0 <= y < h:
                    for j in range(kw):
                        xx = q * sw - pw + j * dw
                        if 0 <= xx < w:
                            for ch in range(c):
                                out[b, r, q, ch] = max(out[b, r, q, ch], x[b, y, xx, ch])


def max_pool(x, geo):
    """Max pooling of a uint8 NHWC view (N, C, H, W) (``is_nhwc``); the result is one
    too.  Every window holds an input element (checked), so starting at 0 is exact."""
    op = "nhwc.max_pool"
    argcheck.arrays(op, x=x)
    argcheck.ndim_is(op, "x", x, 4)
    argcheck.dtype_is(op, "x", x, np.uint8)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = argcheck.ints(op, "geo", geo, 10)
    argcheck.windows(op, x.shape[2:], (oh, ow), (kh, kw), (sh, sw), (ph, pw), (dh, dw),
                     inside=True)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.empty((x.shape[0], oh, ow, x.shape[1]), np.uint8)
    runtime.run_ranges(lambda p0, p1: _max_pool(xh, kh, kw, sh, sw, ph, pw, dh, dw, out,
                                                p0, p1),
                       x.shape[0] * oh, xh.size, runtime.policy.pool_min_part_items)
    return out.transpose(0, 3, 1, 2)
