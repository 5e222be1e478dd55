"""Numba kernels of the integer operators (the portable path: where the CPU target has
AVX2 or VNNI, convolutions and linear layers run ``quantization.nhwc`` instead);
``reference.py`` holds their NumPy twins and the tests check that both give the same
integers on every shape tried.

Importing this module imports Numba: operators import it only once
``lezero.kernels.enabled(x)`` said yes.  Every kernel is compiled with ``cache=True``.

The products.  Operands are int16 with the zero points already subtracted
(``x - z_x`` and ``w - z_w`` lie in [-255, 255]), so no correction terms are needed and
each output is one dot product over a contiguous row of the weights and a contiguous row
of the (im2col'ed) input.  LLVM vectorises that loop with ``vpmaddwd`` (``vpdpwssd``
where AVX512-VNNI exists): sixteen int16 products summed pairwise into int32 lanes per
instruction.  Int16 rather than int8 operands because LLVM does not form ``vpmaddubsw``
/ ``vpdpbusd`` from Numba's loops (measured: uint8 operands ran at about 60% of int16's
speed).  A second pass requantizes the int32 sums: bias, fixed-point multiplier, output
zero point, one byte out.  Parallel loops run over (row, column) or (image, channel)
pairs, which keeps a batch of one parallel too.
"""
import numpy as np
from numba import njit, prange

from lezero.kernels import argcheck

__all__ = ["gemm_requant", "gemm_acc", "im2col", "conv_requant", "conv2d", "max_pool", "avg_pool",
           "adaptive_avg_pool", "rescale", "add", "mul"]

_OPTS = dict(cache=True, error_model="numpy", nogil=True)

# ----- what the kernels rely on ----------------------------------------------------------
# The loops below index without bounds checks, so each wrapper checks its arrays' shapes,
# the per-channel requantization tables and the window geometry first (argcheck).

SHIFTS = (-31, 30)          # quantize_multiplier's range: 31 - shift is a valid int64 shift


def _check_tables(op, channels, bias, m, shift):
    """One bias, multiplier and shift per output channel, within what mbqm assumes."""
    argcheck.arrays(op, bias=bias, m=m, shift=shift)
    for name, t in (("bias", bias), ("m", m), ("shift", shift)):
        if t.dtype.kind not in "iu":
            raise TypeError(f"{op}: {name} must hold integers, got dtype {t.dtype}")
        argcheck.shape_is(op, name, t, (channels,))
    if channels and (int(m.min()) < 0 or int(m.max()) >= 1 << 31
                     or int(shift.min()) < SHIFTS[0] or int(shift.max()) > SHIFTS[1]):
        raise ValueError(f"{op}: multipliers must lie in [0, 2**31) and shifts in "
                         f"[{SHIFTS[0]}, {SHIFTS[1]}], got m in [{int(m.min())}, "
                         f"{int(m.max())}] and shift in [{int(shift.min())}, "
                         f"{int(shift.max())}]")


def _check_scalars(op, mults=(), shifts=(), left=None, lo=0, hi=0, dtype=np.int8):
    """Scalar multipliers and shifts (as ``_check_tables``), the left shift of ``add``,
    the output's dtype (integers) and range."""
    if any(not 0 <= int(v) < 1 << 31 for v in mults) or \
            any(not SHIFTS[0] <= int(v) <= SHIFTS[1] for v in shifts):
        raise ValueError(f"{op}: multipliers must lie in [0, 2**31) and shifts in "
                         f"[{SHIFTS[0]}, {SHIFTS[1]}], got {tuple(int(v) for v in mults)} "
                         f"and {tuple(int(v) for v in shifts)}")
    if left is not None and not 0 <= int(left) <= 31:
        raise ValueError(f"{op}: the left shift must lie in [0, 31], got {int(left)}")
    if np.dtype(dtype).kind not in "iu" or int(lo) > int(hi):
        raise ValueError(f"{op}: the output must be integers in a range lo <= hi, got "
                         f"dtype {np.dtype(dtype)} and [{int(lo)}, {int(hi)}]")


def _check_int16_rows(op, name, a):
    argcheck.arrays(op, **{name: a})
    argcheck.dtype_is(op, name, a, np.int16)


def _check_geo(op, x, geo, pooling):
    """``x`` (N, C, H, W) integers and the 10 ints of ``geo``, which must fit it (for
    pooling, every window must hold an input element)."""
    argcheck.arrays(op, x=x)
    argcheck.ndim_is(op, "x", x, 4)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{op}: x must hold integers, got dtype {x.dtype}")
    geo = argcheck.ints(op, "geo", geo, 10)
    argcheck.windows(op, x.shape[2:], geo[8:10], geo[0:2], geo[2:4], geo[4:6], geo[6:8],
                     inside=pooling)
    return geo



@njit(inline="always", **_OPTS)
def _mbqm(x, m, shift):
    """MultiplyByQuantizedMultiplier on int64 scalars (see ``fixed_point.mbqm``)."""
    total = 31 - shift
    return (x * m + (np.int64(1) << (total - 1))) >> total


@njit(inline="always", **_OPTS)
def _requant(acc, bias, m, shift, zp, lo, hi):
    y = _mbqm(np.int64(acc) + bias, np.int64(m), np.int64(shift)) + zp
    return lo if y < lo else (hi if y > hi else y)


@njit(inline="always", **_OPTS)
def _dot(a, ia, b, ib, k):
    """Sum over t < k of a[ia, t] * b[ib, t] (int16 rows) in int32."""
    acc = np.int32(0)
    for t in range(k):
        acc += np.int32(a[ia, t]) * np.int32(b[ib, t])
    return acc


@njit(parallel=True, **_OPTS)
def _gemm_acc(a, b, out):
    """out[i, j] = sum_t a[i, t] b[j, t], parallel over (i, j) pairs."""
    rows, k = a.shape
    cols = b.shape[0]
    for p in prange(rows * cols):
        i, j = p // cols, p % cols
        out[i, j] = _dot(a, i, b, j, k)


@njit(parallel=True, **_OPTS)
def _conv_acc(w, col, out):
    """out[n, o, s] = sum_t w[o, t] col[n, s, t], parallel over (n, o) pairs."""
    batch, spatial, k = col.shape
    o = w.shape[0]
    for p in prange(batch * o):
        n, ch = p // o, p % o
        cn = col[n]
        for s in range(spatial):
            out[n, ch, s] = _dot(w, ch, cn, s, k)


# The requantization runs as a second pass over the int32 sums: fused into the loop nest
# of the products, it stopped LLVM from vectorising the dot product (measured: 30-40%
# slower), and the extra pass reads 4 bytes per output against K products per output.
@njit(parallel=True, **_OPTS)
def _requant_last(acc, bias, m, shift, zp, lo, hi, out):
    rows, cols = acc.shape
    for i in prange(rows):
        for j in range(cols):
            out[i, j] = _requant(acc[i, j], bias[j], m[j], shift[j], zp, lo, hi)


@njit(parallel=True, **_OPTS)
def _requant_middle(acc, bias, m, shift, zp, lo, hi, out):
    batch, chans, spatial = acc.shape
    for p in prange(batch * chans):
        n, c = p // chans, p % chans
        bc, mc, sc = bias[c], m[c], shift[c]
        for s in range(spatial):
            out[n, c, s] = _requant(acc[n, c, s], bc, mc, sc, zp, lo, hi)


def _requant_args(bias, m, shift, zp, lo, hi):
    return (bias.astype(np.int64), m.astype(np.int64), shift.astype(np.int64), np.int64(zp),
            np.int64(lo), np.int64(hi))


def gemm_acc(a, b):
    """``a @ b.T`` as int32 accumulators: int16 ``a`` (M, K) and ``b`` (N, K)."""
    _check_int16_rows("gemm_acc", "a", a)
    _check_int16_rows("gemm_acc", "b", b)
    argcheck.ndim_is("gemm_acc", "a", a, 2)
    argcheck.ndim_is("gemm_acc", "b", b, 2)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"gemm_acc: a (M, K) and b (N, K) must share K, got {a.shape} and "
                         f"{b.shape}")
    out = np.empty((a.shape[0], b.shape[0]), np.int32)
    _gemm_acc(a, b, out)
    return out


def gemm_requant(a, b, bias, m, shift, zp, lo, hi, dtype):
    """``requantize(a @ b.T + bias)`` per column ``j`` of the (M, N) result; ``bias``
    int32, ``m``/``shift`` int32 per column."""
    acc = gemm_acc(a, b)
    _check_tables("gemm_requant", b.shape[0], bias, m, shift)
    _check_scalars("gemm_requant", lo=lo, hi=hi, dtype=dtype)
    out = np.empty((a.shape[0], b.shape[0]), dtype)
    _requant_last(acc, *_requant_args(bias, m, shift, zp, lo, hi), out)
    return out


@njit(parallel=True, **_OPTS)
def _im2col(x, zp, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col):
    n, h, w, c = x.shape            # channels last: each kernel tap copies a run of C
    for p in prange(n * oh):
        b, r = p // oh, p % oh
        for q in range(ow):
            row = r * ow + q
            for i in range(kh):
                y = r * sh - ph + i * dh
                for j in range(kw):
                    xx = q * sw - pw + j * dw
                    base = (i * kw + j) * c
                    dst = col[b, row, base:base + c]    # a view: 'base + ch' as an index
                    if 0 <= y < h and 0 <= xx < w:      # would not vectorise (wraparound)
                        src = x[b, y, xx]
                        for ch in range(c):
                            dst[ch] = np.int16(src[ch]) - zp
                    else:
                        for ch in range(c):
                            dst[ch] = 0


def im2col(x, zp, geo):
    """Numba twin of ``reference.im2col_ref``: int16 patches (N, OH*OW, KH*KW*C)."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = _check_geo("im2col", x, geo, False)
    col = np.empty((x.shape[0], oh * ow, x.shape[1] * kh * kw), np.int16)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    _im2col(nhwc, np.int16(zp), kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col)
    return col


_CHUNK_BYTES = 1 << 20      # patches per chunk of images: about L2-sized


def conv2d(x, x_zp, geo, w, bias, m, shift, zp, lo, hi, dtype):
    """The whole quantized convolution of ``x`` (N, C, H, W): patches and products a few
    images at a time, so that each chunk's int16 patch matrix stays in cache (gathering
    all of a batch first was twice as slow at batch 32).  Returns (N, O, OH*OW)."""
    geo = _check_geo("conv2d", x, geo, False)
    _check_product("conv2d", x.shape[1] * geo[0] * geo[1], w, bias, m, shift, lo, hi, dtype)
    n = x.shape[0]
    per_image = geo[8] * geo[9] * w.shape[1] * 2
    step = max(1, _CHUNK_BYTES // max(per_image, 1))
    if step >= n:
        return conv_requant(im2col(x, x_zp, geo), w, bias, m, shift, zp, lo, hi, dtype)
    out = np.empty((n, w.shape[0], geo[8] * geo[9]), dtype)
    for i in range(0, n, step):
        out[i:i + step] = conv_requant(im2col(x[i:i + step], x_zp, geo), w, bias, m, shift,
                                       zp, lo, hi, dtype)
    return out


def _check_product(op, k, w, bias, m, shift, lo, hi, dtype):
    """int16 weights (O, k) -- ``k`` the patch length the input gives -- and O entries
    in each requantization table."""
    _check_int16_rows(op, "w", w)
    if w.ndim != 2 or w.shape[1] != k:
        raise ValueError(f"{op}: w must be (out_channels, {k}) for these patches, got "
                         f"shape {w.shape}")
    _check_tables(op, w.shape[0], bias, m, shift)
    _check_scalars(op, lo=lo, hi=hi, dtype=dtype)


def conv_requant(col, w, bias, m, shift, zp, lo, hi, dtype):
    """A quantized convolution's output (N, O, L) from its patches ``col`` (N, L, K) and
    int16 weights ``w`` (O, K), requantized per output channel."""
    _check_int16_rows("conv_requant", "col", col)
    argcheck.ndim_is("conv_requant", "col", col, 3)
    _check_product("conv_requant", col.shape[2], w, bias, m, shift, lo, hi, dtype)
    acc = np.empty((col.shape[0], w.shape[0], col.shape[1]), np.int32)
    _conv_acc(w, col, acc)
    out = np.empty(acc.shape, dtype)
    _requant_middle(acc, *_requant_args(bias, m, shift, zp, lo, hi), out)
    return out


# ----- pooling ------------------------------------------------------------------------------

@njit(**_OPTS)
def _max_pool(x, kh, kw, sh, sw, ph, pw, dh, dw, out):
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for b in range(n):
        for ch in range(c):
            for r in range(oh):
                for q in range(ow):
                    best = np.int32(-1 << 30)
                    for i in range(kh):
                        y = r * sh - ph + i * dh
                        if 0 <= y < h:
                            for j in range(kw):
                                xx = q * sw - pw + j * dw
                                if 0 <= xx < w and np.int32(x[b, ch, y, xx]) > best:
                                    best = np.int32(x[b, ch, y, xx])
                    out[b, ch, r, q] = best


def max_pool(x, geo):
    """Numba twin of ``reference.max_pool_ref``."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = _check_geo("max_pool", x, geo, True)
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    _max_pool(np.ascontiguousarray(x), kh, kw, sh, sw, ph, pw, dh, dw, out)
    return out


@njit(inline="always", **_OPTS)
def _round_div(total, count):
    """total / count rounded to nearest, ties to even (``reference._round_div``)."""
    q = total // count
    r2 = 2 * (total - q * count)
    return q + (1 if r2 > count else 0) + (1 if (r2 == count and (q & 1) == 1) else 0)


@njit(**_OPTS)
def _avg_pool(x, kh, kw, sh, sw, ph, pw, zp, include_pad, divisor, lo, hi, out):
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for b in range(n):
        for ch in range(c):
            for r in range(oh):
                y0 = r * sh - ph
                for q in range(ow):
                    x0 = q * sw - pw
                    total, inside = np.int64(0), np.int64(0)
                    for y in range(max(y0, 0), min(y0 + kh, h)):
                        for xx in range(max(x0, 0), min(x0 + kw, w)):
                            total += np.int64(x[b, ch, y, xx]) - zp
                            inside += 1
                    if divisor > 0:
                        count = divisor
                    elif include_pad:
                        count = (min(y0 + kh, h + ph) - y0) * (min(x0 + kw, w + pw) - x0)
                    else:
                        count = inside
                    v = _round_div(total, np.int64(count)) + zp
                    out[b, ch, r, q] = lo if v < lo else (hi if v > hi else v)


def avg_pool(x, geo, zero_point, count_include_pad=True, divisor_override=None):
    """Numba twin of ``reference.avg_pool_ref`` (dilation 1)."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = _check_geo("avg_pool", x, geo, True)
    if (dh, dw) != (1, 1):
        raise ValueError(f"avg_pool: dilation must be (1, 1), got {(dh, dw)}")
    if divisor_override is not None:
        argcheck.ints("avg_pool", "divisor_override", (divisor_override,), 1, low=1)
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    info = np.iinfo(x.dtype)
    _avg_pool(np.ascontiguousarray(x), kh, kw, sh, sw, ph, pw, np.int64(zero_point),
              bool(count_include_pad), int(divisor_override or 0), np.int64(info.min),
              np.int64(info.max), out)
    return out


@njit(**_OPTS)
def _adaptive_avg_pool(x, hs, he, ws, we, out):
    n, c = x.shape[:2]
    oh, ow = out.shape[2], out.shape[3]
    for b in range(n):
        for ch in range(c):
            for r in range(oh):
                for q in range(ow):
                    total = np.int64(0)
                    for y in range(hs[r], he[r]):
                        for xx in range(ws[q], we[q]):
                            total += np.int64(x[b, ch, y, xx])
                    count = np.int64((he[r] - hs[r]) * (we[q] - ws[q]))
                    out[b, ch, r, q] = _round_div(total, count)


def adaptive_avg_pool(x, out_hw):
    """Numba twin of ``reference.adaptive_avg_pool_ref``."""
    from lezero.quantization.reference import adaptive_bounds
    argcheck.arrays("adaptive_avg_pool", x=x)
    argcheck.ndim_is("adaptive_avg_pool", "x", x, 4)
    out_hw = argcheck.ints("adaptive_avg_pool", "output size", out_hw, 2, low=1)
    (hs, he), (ws, we) = adaptive_bounds(x.shape[2], out_hw[0]), adaptive_bounds(
        x.shape[3], out_hw[1])
    out = np.empty(x.shape[:2] + tuple(out_hw), x.dtype)
    _adaptive_avg_pool(np.ascontiguousarray(x), hs, he, ws, we, out)
    return out


# ----- elementwise --------------------------------------------------------------------------

@njit(**_OPTS)
def _rescale(x, zx, m, shift, zy, lo, hi, out):
    for i in range(x.size):
        v = _mbqm(np.int64(x[i]) - zx, m, shift) + zy
        out[i] = lo if v < lo else (hi if v > hi else v)


def rescale(x, zx, m, shift, zy, lo, hi, dtype):
    """Numba twin of ``reference.rescale_ref``."""
    argcheck.arrays("rescale", x=x)
    _check_scalars("rescale", (m,), (shift,), lo=lo, hi=hi, dtype=dtype)
    out = np.empty(x.shape, dtype)
    _rescale(np.ascontiguousarray(x).reshape(-1), np.int64(zx), np.int64(m), np.int64(shift),
             np.int64(zy), np.int64(lo), np.int64(hi), out.reshape(-1))
    return out


@njit(**_OPTS)
def _add(a, b, za, ma, sa, zb, mb, sb, mo, so, zy, left, lo, hi, out):
    for i in range(a.size):
        a2 = _mbqm((np.int64(a[i]) - za) << left, ma, sa)
        b2 = _mbqm((np.int64(b[i]) - zb) << left, mb, sb)
        v = _mbqm(a2 + b2, mo, so) + zy
        out[i] = lo if v < lo else (hi if v > hi else v)


def _binary(kernel, a, b, p, lo, hi, dtype):
    """``kernel`` over ``a`` and ``b`` of one shape (the loop reads ``b[i]`` for every
    element of ``a``) with the parameters ``p``."""
    op = kernel.py_func.__name__.strip("_")
    argcheck.arrays(op, a=a, b=b)
    argcheck.same_shape(op, "a", a, "b", b)
    wanted = 10 if op == "add" else 5
    p = argcheck.ints(op, "parameters", p, wanted)
    if op == "add":      # (za, ma, sa, zb, mb, sb, mo, so, zy, left): add_params
        _check_scalars(op, p[1:7:3] + p[6:7], p[2:8:3] + p[7:8], p[9], lo, hi, dtype)
    else:                # (za, zb, m, s, zy)
        _check_scalars(op, p[2:3], p[3:4], None, lo, hi, dtype)
    # Channels-last views (what the VNNI convolutions return) stay so: no transposing copy.
    nhwc = a.ndim == 4 and all(t.transpose(0, 2, 3, 1).flags.c_contiguous for t in (a, b))
    if nhwc:
        a, b = a.transpose(0, 2, 3, 1), b.transpose(0, 2, 3, 1)
    out = np.empty(a.shape, dtype)
    kernel(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1),
           *[np.int64(v) for v in p], np.int64(lo), np.int64(hi), out.reshape(-1))
    return out.transpose(0, 3, 1, 2) if nhwc else out


def add(a, b, p, lo, hi, dtype):
    """Numba twin of ``reference.add_ref`` (``a`` and ``b`` of one shape)."""
    return _binary(_add, a, b, p, lo, hi, dtype)


@njit(**_OPTS)
def _mul(a, b, za, zb, m, s, zy, lo, hi, out):
    for i in range(a.size):
        v = _mbqm((np.int64(a[i]) - za) * (np.int64(b[i]) - zb), m, s) + zy
        out[i] = lo if v < lo else (hi if v > hi else v)


def mul(a, b, p, lo, hi, dtype):
    """Numba twin of ``reference.mul_ref``."""
    return _binary(_mul, a, b, p, lo, hi, dtype)
