"""Quantized products on an external uint8 x int8 -> int32 GEMM (MKL's, on AMX or VNNI),
in blocks of output rows: gather the block's patch rows, one GEMM, requantize to bytes.

Why blocks: a whole patch matrix is KH*KW times the input (14 MB for one ResNet-18 3x3
layer at batch 8); a block (``block_rows``: patch rows and products within about 1 MiB)
stays in L2 from the gather through the GEMM, and its int32 products are requantized
while still in cache; blocks are large enough that MKL's fixed cost per call stays
small beside the product.  The GEMM
function (a ctypes ``cblas_gemm_s8u8s32``) is a kernel argument, called from the Numba
loop itself, so a layer costs one Python call per thread, not one per block.

The rows of the patch matrix are output pixels (N*OH*OW); a row holds the window's taps,
channels last -- ``len(toff)`` runs of ``run`` bytes read from the padded NHWC input at
byte offsets ``base(pixel) + toff[t]``, the order of the (O, K) weight matrix.  A 1x1,
stride-1 convolution over an unpadded NHWC input (and a Linear) needs no gather: its
input rows ARE the patch rows (``direct``).  The requantization is ``int8_gemm``'s
epilogue (``int8_gemm._table``: bias with the input zero point folded in, fixed-point
multiplier, rounding, shift, output zero point, clamp): the integers of
``quantization.reference``.

``blocks`` checks everything the kernels rely on (they index without bounds checks) and
splits the blocks over the runtime's threads, each part with its own scratch.
"""
import numpy as np

from lezero.kernels import argcheck, jit, uint64
from lezero.runtime import NO_TRANS, ROW_MAJOR, TRANS, policy, run_parts, threads_for

__all__ = ["FIX_OFFSET", "block_rows", "blocks", "plan", "window_runs"]

FIX_OFFSET = 173            # CblasFixOffset: one (zero) offset added to all of C
_ONE, _ZERO = np.float32(1.0), np.float32(0.0)
_SCRATCH_BYTES = 1 << 20    # patch rows + int32 products of a block: half of L2
_ZERO_OFFSET = np.zeros(1, np.int32)


@jit(cache=True, nogil=True)
def _gather(xp, grid, toff, run, r0, n, patches):
    """``patches[r]`` = the window of output pixel ``r0 + r`` (``grid``: OH, OW, HP, WP,
    CP, SH, SW of the padded input ``xp``, flat bytes)."""
    oh, ow, hp, wp, cp, sh, sw = grid[0], grid[1], grid[2], grid[3], grid[4], grid[5], grid[6]
    for r in range(n):
        p = r0 + r
        b, rem = p // (oh * ow), p % (oh * ow)
        base = ((b * hp + (rem // ow) * sh) * wp + (rem % ow) * sw) * cp
        row = patches[r]
        for t in range(toff.size):
            # unsigned indices: no negative-index wraparound, so LLVM vectorizes the copy
            # (signed ones run it a byte at a time, 30x slower)
            src, dst = uint64(base + toff[t]), uint64(t * run)
            for i in range(uint64(run)):
                row[dst + i] = xp[src + i]


@jit(cache=True, nogil=True)
def _requant(acc, n, table, zp, lo, hi, out, r0, c0):
    """``out[r0 + r, c0 + c]`` = clamp(((acc[r, c] + bias) * m + rnd) >> total + zp),
    with channel ``c0 + c``'s bias, m, rnd and total from ``table``.  (Views from ``c0``
    on: indexing with ``c0 + c`` instead stops LLVM's vectorizer, 3.6x slower.)"""
    o = acc.shape[1]
    bias, mul, rnd, total = (table[0, c0:c0 + o], table[1, c0:c0 + o],
                             table[2, c0:c0 + o], table[3, c0:c0 + o])
    for r in range(n):
        a, dst = acc[r], out[r0 + r, c0:c0 + o]
        for c in range(o):
            v = (np.int64(a[c]) + bias[c]) * mul[c]
            y = ((v + rnd[c]) >> total[c]) + zp
            dst[c] = lo if y < lo else (hi if y > hi else y)


@jit(cache=True, nogil=True)
def _run_blocks(gemm, zero, xp, grid, toff, run, direct, w, table, zp, lo, hi, out,
                patches, acc, block, first, stop, c0):
    """Blocks ``first <= i < stop`` of ``block`` output rows, output channels ``c0`` to
    ``c0 + acc.shape[1]``: gather (unless ``direct``: then ``xp`` is the (rows, K) patch
    matrix itself), GEMM into ``acc``, requantize."""
    rows, o, k = out.shape[0], acc.shape[1], w.shape[1]
    for i in range(first, stop):
        r0 = i * block
        n = min(block, rows - r0)
        if direct:
            a = xp.ctypes.data + np.uint64(r0 * k)      # uint64 + int64 would be a float
        else:
            _gather(xp, grid, toff, run, r0, n, patches)
            a = patches.ctypes.data
        gemm(ROW_MAJOR, NO_TRANS, TRANS, FIX_OFFSET, n, o, k, _ONE, a, k, np.int8(0),
             w.ctypes.data + np.uint64(c0 * k), k, np.int8(0), _ZERO, acc.ctypes.data, o,
             zero.ctypes.data)
        _requant(acc, n, table, zp, lo, hi, out, r0, c0)


def window_runs(geo, wp, cp):
    """(byte offsets, run length) of a window's contiguous runs in a padded NHWC input
    of row width ``wp`` and ``cp`` channels: one run per kernel row when the columns are
    not dilated (KW pixels side by side), else one per tap."""
    kh, kw, dh, dw = geo[0], geo[1], geo[6], geo[7]
    if dw == 1:
        return np.array([i * dh * wp * cp for i in range(kh)], np.int64), kw * cp
    return np.array([(i * dh * wp + j * dw) * cp for i in range(kh) for j in range(kw)],
                    np.int64), cp


def block_rows(k, o):
    """Output rows per block: patch rows and products within ``_SCRATCH_BYTES``, a
    multiple of 16 (AMX's tile height) between 256 and 4096 (each GEMM call costs MKL
    5-30 us of its own: smaller blocks pay it too often)."""
    rows = _SCRATCH_BYTES // max(k + 4 * o, 1)
    return int(min(4096, max(256, rows // 16 * 16)))


def _check(op, xp, geo, w, table, out):
    """Raise unless the kernels' reads and writes stay inside these arrays; returns
    ``geo`` as ints and whether the input rows are the patch rows (``direct``)."""
    argcheck.arrays(op, xp=xp, w=w, table=table, out=out)
    argcheck.dtype_is(op, "xp", xp, np.uint8)
    argcheck.dtype_is(op, "w", w, np.int8)
    argcheck.dtype_is(op, "table", table, np.int64)
    argcheck.dtype_is(op, "out", out, np.uint8, np.int8)
    argcheck.ndim_is(op, "xp", xp, 4)
    argcheck.ndim_is(op, "w", w, 2)
    for name, a in (("xp", xp), ("w", w), ("table", table), ("out", out)):
        argcheck.c_contiguous(op, name, a)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = argcheck.ints(op, "geo", geo, 10)
    n, hp, wp, cp = xp.shape
    argcheck.windows(op, (hp, wp), (oh, ow), (kh, kw), (sh, sw), (0, 0), (dh, dw))
    if (ph, pw) != (0, 0) or w.shape[1] != kh * kw * cp or cp == 0:
        raise ValueError(f"{op}: w must have KH*KW*CP = {kh * kw * cp} > 0 columns and "
                         f"geo padding 0 (already applied), got w {w.shape} and geo {geo}")
    if (oh - 1) * sh + (kh - 1) * dh >= hp or (ow - 1) * sw + (kw - 1) * dw >= wp:
        raise ValueError(f"{op}: the windows of geo {geo} reach past xp {xp.shape}")
    argcheck.shape_is(op, "table", table, (4, w.shape[0]))
    argcheck.shape_is(op, "out", out, (n * oh * ow, w.shape[0]))
    return (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow), (kh, kw, sh, sw, hp, wp) == (
        1, 1, 1, 1, oh, ow)


def blocks(gemm, xp, geo, w, table, zp, lo, hi, out, min_part, block=None):
    """``out`` (N*OH*OW, O) = requant of the convolution of the padded NHWC uint8 input
    ``xp`` (N, HP, WP, CP) with int8 weights ``w`` (O, KH*KW*CP), taps channels last;
    ``geo`` as ``quantization.reference.geometry`` with the padding applied (0),
    ``table`` from ``int8_gemm._table``, ``gemm`` a ctypes ``cblas_gemm_s8u8s32``.
    The work goes to up to one part per thread (``plan``), in blocks of at most
    ``block`` rows (default ``block_rows``); ``min_part`` multiply-adds at least per part."""
    op = "int8_blocks.blocks"
    geo, direct = _check(op, xp, geo, w, table, out)
    if getattr(gemm, "argtypes", None) is None or len(gemm.argtypes) != 18:
        raise TypeError(f"{op}: gemm must be a ctypes cblas_gemm_s8u8s32 with its 18 "
                        f"argtypes declared, got {gemm!r}")
    for name, v in (("zp", zp), ("lo", lo), ("hi", hi)):
        if not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__}")
    rows, (o, k) = out.shape[0], w.shape
    if rows == 0 or o == 0:
        return out
    toff, run = window_runs(geo, xp.shape[2], xp.shape[3])
    grid = np.array((geo[8], geo[9]) + xp.shape[1:] + tuple(geo[2:4]), np.int64)
    limit = block_rows(k, o) if block is None else int(block)
    if limit < 1:
        raise ValueError(f"{op}: block must be a positive number of rows, got {block}")
    block, ranges = plan(rows, o, rows * o * k, limit, min_part)
    flat = xp.reshape(-1)

    def part(i):
        first, stop, c0, c1 = ranges[i]
        patches = np.empty((0 if direct else block, k), np.uint8)
        acc = np.empty((block, c1 - c0), np.int32)
        _run_blocks(gemm, _ZERO_OFFSET, flat, grid, toff, run, direct, w, table,
                    np.int64(zp), np.int64(lo), np.int64(hi), out, patches, acc, block,
                    first, stop, c0)
    if len(ranges) == 1:
        part(0)
    else:
        run_parts(part, len(ranges))
    return out


def plan(rows, o, work, limit, min_part):
    """(block, parts): blocks of at most ``limit`` rows, and per part (first block, stop
    block, first channel, stop channel).  Up to one part per thread, each at least
    ``min_part`` of ``work``; the parts share the rows (16 at least each) in equal blocks or,
    when that leaves a part fewer than ``policy.gemm_min_part_rows`` rows (a deep layer
    at a small batch), share the output channels, in multiples of 16 (each part then
    reads a share of the weights instead of all of them)."""
    parts = threads_for(max(-(-rows // 16), o // 16), work, min_part)
    if parts > 1 and rows < policy.gemm_min_part_rows * parts and o >= 16 * parts:
        count = -(-rows // limit)
        edges = [o * i // parts // 16 * 16 for i in range(parts)] + [o]
        return -(-rows // count), [(0, count) + e for e in zip(edges[:-1], edges[1:])]
    parts = min(parts, -(-rows // 16))
    count = parts * -(-rows // (parts * limit))      # equal blocks, as many in each part
    return -(-rows // count), [(count * i // parts, count * (i + 1) // parts, 0, o)
                               for i in range(parts)]
