"""NumPy integer references of the quantized operators: what the Numba kernels
(``kernels.py``) must reproduce bit for bit.

Conventions.  An activation ``q`` (uint8 or int8) with zero point ``z`` stands for
``scale * (q - z)``.  Products are formed on ``int16`` operands that already had their
zero points subtracted (``x - z_x`` is in [-255, 255] and ``w - z_w`` too), summed in int32
(int64 here, which equals int32 while no sum overflows: the wrappers refuse reductions
longer than ``MAX_K``), then requantized with ``fixed_point.mbqm``.

``geo`` (convolution and pooling) is the tuple ``(kh, kw, sh, sw, ph, pw, dh, dw, oh,
ow)``: kernel, stride, low padding, dilation and output size.
"""
import numpy as np

from lezero import cuda
from lezero.quantization.fixed_point import mbqm

__all__ = ["MAX_K", "geometry", "quantize_ref", "dequantize_ref", "gemm_ref", "im2col_ref", "pack_weight",
           "conv_acc_ref", "requantize_ref", "max_pool_ref", "avg_pool_ref",
           "adaptive_avg_pool_ref", "rescale_ref", "add_ref", "mul_ref", "adaptive_bounds"]

# |x - z_x| * |w - z_w| <= 255 * 255, so sums of up to MAX_K products fit in int32.
MAX_K = (2 ** 31 - 1) // (255 * 255)


def _out_size(size, k, s, p, d, ceil_mode=False):
    span = size + 2 * p - d * (k - 1) - 1
    n = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (n - 1) * s >= size + p:      # PyTorch: the last window must start
        n -= 1                                     # inside the input or left padding
    return n


def geometry(in_hw, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    """The ``geo`` tuple of a 2-D window operation on an input of spatial size ``in_hw``."""
    (h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = in_hw, kernel, stride, padding, dilation
    oh = _out_size(h, kh, sh, ph, dh, ceil_mode)
    ow = _out_size(w, kw, sw, pw, dw, ceil_mode)
    return (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)


# ----- quantize / dequantize (float <-> integer) ------------------------------------------

def quantize_ref(x, scale, zero_point, qmin, qmax, dtype):
    """``clamp(round_half_even(x * (1/scale)) + z, qmin, qmax)`` as ``dtype`` (PyTorch's
    arithmetic: the reciprocal in float32, then a float32 product)."""
    xp = cuda.get_array_module(x)
    inv = np.float32(1.0) / np.float32(scale)
    q = xp.rint(x.astype(np.float32, copy=False) * inv) + np.float32(zero_point)
    return xp.clip(q, qmin, qmax).astype(dtype)


def dequantize_ref(q, scale, zero_point):
    """``scale * (q - z)`` in float32."""
    return (q.astype(np.int32) - np.int32(zero_point)).astype(np.float32) * np.float32(scale)


# ----- products ---------------------------------------------------------------------------

def gemm_ref(a, b):
    """``a @ b.T`` of int16 matrices (M, K) and (N, K), accumulated exactly: int32 (M, N)."""
    return (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)


def im2col_ref(x, zero_point, geo):
    """Patches of ``x`` (N, C, H, W), zero point subtracted, as int16 (N, OH*OW, K) with
    ``K`` ordered (KH, KW, C) -- channels fastest, as the kernel reads channels-last data;
    weights are packed to match (``pack_weight``).  Padding reads as the zero point (the
    real value 0), i.e. 0 after the subtraction."""
    xp = cuda.get_array_module(x)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    n, c, h, w = x.shape
    hp = max(h + 2 * ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + 2 * pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    pad = xp.zeros((n, hp, wp, c), np.int16)
    pad[:, ph:ph + h, pw:pw + w] = x.transpose(0, 2, 3, 1).astype(np.int16) - np.int16(
        zero_point)
    col = xp.empty((n, oh, ow, kh, kw, c), np.int16)
    for i in range(kh):
        for j in range(kw):
            col[:, :, :, i, j] = pad[:, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                                     j * dw:j * dw + (ow - 1) * sw + 1:sw]
    return col.reshape(n, oh * ow, kh * kw * c)


def pack_weight(w, zero_point):
    """Integer weights (O, C, KH, KW) or (O, K) as the int16 (O, K) rows the products
    read: zero point subtracted, convolution taps ordered (KH, KW, C)."""
    xp = cuda.get_array_module(w)
    zp = xp.asarray(zero_point, dtype=np.int16).reshape((-1,) + (1,) * (w.ndim - 1))
    w16 = w.astype(np.int16) - zp
    if w.ndim == 4:
        w16 = w16.transpose(0, 2, 3, 1)
    return xp.ascontiguousarray(w16.reshape(w.shape[0], -1))


def conv_acc_ref(col, w):
    """int32 (N, O, L) accumulators of a convolution: ``w`` (O, K) int16 against the
    patches ``col`` (N, L, K) int16."""
    return np.einsum("nlk,ok->nol", col.astype(np.int64), w.astype(np.int64)).astype(np.int32)


def requantize_ref(acc, bias, m, shift, zero_point, lo, hi, axis, dtype):
    """``clamp(mbqm(acc + bias, m, shift) + z, lo, hi)`` as ``dtype``; ``bias`` (int32 or
    None), ``m`` and ``shift`` are per channel along ``axis`` of ``acc``."""
    xp = cuda.get_array_module(acc)
    shape = [1] * acc.ndim
    shape[axis] = -1
    acc = acc.astype(np.int64)
    if bias is not None:
        acc = acc + xp.asarray(bias, dtype=np.int64).reshape(shape)
    y = mbqm(acc, xp.asarray(m).reshape(shape), xp.asarray(shift).reshape(shape))
    return xp.clip(y + zero_point, lo, hi).astype(dtype)


# ----- pooling (the output keeps the input's scale and zero point) ------------------------

def _windows(x, geo, fill):
    """(N, C, OH, OW, KH*KW) windows of ``x`` padded with ``fill``."""
    xp = cuda.get_array_module(x)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    n, c, h, w = x.shape
    hp = max(h + 2 * ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + 2 * pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    pad = xp.full((n, c, hp, wp), fill, dtype=np.int32)
    pad[:, :, ph:ph + h, pw:pw + w] = x
    inside = xp.zeros((hp, wp), np.int32)
    inside[ph:ph + h, pw:pw + w] = 1
    out = xp.empty((n, c, oh, ow, kh * kw), np.int32)
    count = xp.empty((oh, ow, kh * kw), np.int32)
    for i in range(kh):
        for j in range(kw):
            hs = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            ws = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            out[..., i * kw + j] = pad[:, :, hs, ws]
            count[..., i * kw + j] = inside[hs, ws]
    return out, count


def max_pool_ref(x, geo):
    """Max pooling of integers (padding never wins)."""
    low = np.iinfo(x.dtype).min
    win, _ = _windows(x, geo, low)
    return win.max(axis=-1).astype(x.dtype)


def _round_div(total, count):
    """``total / count`` rounded to nearest, ties to even (as ``np.rint``, PyTorch's
    quantized pooling and ONNX's QuantizeLinear round), in integers."""
    q = total // count
    r2 = 2 * (total - q * count)
    return q + (r2 > count) + ((r2 == count) & ((q & 1) == 1))


def avg_pool_ref(x, geo, zero_point, count_include_pad=True, divisor_override=None):
    """Average pooling in integers: ``z + round(sum(q - z) / count)`` (ties to even), so padding
    and the ceil_mode overhang count as the real value 0; ``count`` as PyTorch's."""
    win, inside = _windows(x, geo, zero_point)
    total = (win.astype(np.int64) - zero_point).sum(axis=-1)
    if divisor_override:
        count = divisor_override
    elif count_include_pad:          # PyTorch counts padding, but not the ceil_mode overhang
        count = _padded_count(x.shape[2:], geo)
    else:
        count = inside.sum(axis=-1).astype(np.int64)
    y = _round_div(total, count) + zero_point
    info = np.iinfo(x.dtype)
    return cuda.get_array_module(x).clip(y, info.min, info.max).astype(x.dtype)


def _padded_count(in_hw, geo):
    """Per output position: how many window cells lie inside the padded input."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    h, w = in_hw
    rows = [min(i * sh + kh, h + 2 * ph) - i * sh for i in range(oh)]
    cols = [min(j * sw + kw, w + 2 * pw) - j * sw for j in range(ow)]
    return np.outer(np.asarray(rows), np.asarray(cols)).astype(np.int64)


def adaptive_bounds(size, out):
    """PyTorch's adaptive windows: [floor(i size / out), ceil((i + 1) size / out))."""
    starts = np.array([(i * size) // out for i in range(out)], np.int64)
    ends = np.array([-(-((i + 1) * size) // out) for i in range(out)], np.int64)
    return starts, ends


def adaptive_avg_pool_ref(x, out_hw):
    """Adaptive average pooling in integers (rounded means, ties to even)."""
    xp = cuda.get_array_module(x)
    n, c, h, w = x.shape
    (hs, he), (ws, we) = adaptive_bounds(h, out_hw[0]), adaptive_bounds(w, out_hw[1])
    out = xp.empty((n, c, out_hw[0], out_hw[1]), x.dtype)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            block = x[:, :, hs[i]:he[i], ws[j]:we[j]].astype(np.int64)
            count = int((he[i] - hs[i]) * (we[j] - ws[j]))
            out[:, :, i, j] = _round_div(block.sum(axis=(2, 3)), count)
    return out


# ----- elementwise ------------------------------------------------------------------------

def rescale_ref(x, zx, m, shift, zy, lo, hi, dtype):
    """``x`` moved to another scale and zero point: ``clamp(mbqm(x - zx) + zy)``."""
    xp = cuda.get_array_module(x)
    y = mbqm(x.astype(np.int64) - zx, m, shift) + zy
    return xp.clip(y, lo, hi).astype(dtype)


def add_ref(a, b, p, lo, hi, dtype):
    """TFLite's quantized addition.  ``p`` = (za, ma, sa, zb, mb, sb, mo, so, zy,
    left_shift): each input, zero point removed and shifted left, is scaled to a common
    scale (``ma, sa``/``mb, sb``), the sum to the output scale (``mo, so``)."""
    xp = cuda.get_array_module(a)
    za, ma, sa, zb, mb, sb, mo, so, zy, left = p
    a2 = mbqm((a.astype(np.int64) - za) << left, ma, sa)
    b2 = mbqm((b.astype(np.int64) - zb) << left, mb, sb)
    y = mbqm(a2 + b2, mo, so) + zy
    return xp.clip(y, lo, hi).astype(dtype)


def mul_ref(a, b, p, lo, hi, dtype):
    """Quantized product: ``mbqm((a - za)(b - zb), m, s) + zy``; ``p`` = (za, zb, m, s, zy)."""
    xp = cuda.get_array_module(a)
    za, zb, m, s, zy = p
    prod = (a.astype(np.int64) - za) * (b.astype(np.int64) - zb)
    return xp.clip(mbqm(prod, m, s) + zy, lo, hi).astype(dtype)
