"""uint8 x int8 -> int32 GEMM on VNNI's ``vpdpbusd``, requantized to bytes in its epilogue.

``vpdpbusd`` multiplies four unsigned bytes by four signed bytes and adds the four
products to an int32 lane, exactly (no int16 saturation, unlike AVX2's ``vpmaddubsw``).
LLVM does not form it from a Numba loop, so the inner tile is written in LLVM IR
(``numba.extending.intrinsic``): ROWS rows of the activations times TN output channels,
ROWS x NV vector accumulators held in registers across the whole reduction; each step
broadcasts four bytes of a row and multiplies them with NV vectors of packed weights.

The weights are packed once (``pack``): (O, K) int8 -> [O/TN][K/4][TN][4] bytes, zero
padded.  The activations are raw uint8 (zero point not subtracted), so the product is
``sum x w``; ``sum (x - z) w = sum x w - z * colsum(w)`` folds the zero point into the
bias (``bias_for``).  The epilogue adds that bias, applies the fixed-point multiplier
(``fixed_point.mbqm``), adds the output zero point, clamps and writes one byte: the same
integers as ``quantization.reference`` (the tests check them bit for bit).

Which vectors: 512-bit where the target has AVX512-VNNI, 256-bit with AVX-VNNI, none
otherwise (``ISA`` is None and callers keep their int16 kernels).  The target is Numba's:
``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` when set, else the host, so the code and
Numba's cache (keyed on the same target) always agree.
"""
import numpy as np
from llvmlite import ir
from numba import get_num_threads, njit, prange, types
from numba.extending import intrinsic

from lezero.kernels import argcheck

__all__ = ["ISA", "TN", "Packed", "pack", "bias_for", "checked_table", "gemm_requant",
           "conv_requant", "target_features"]

NV = 2                      # tile: ROWS rows x 2 vectors of output channels


def target_features():
    """The CPU features Numba compiles for (a set of names such as 'avx512vnni')."""
    from numba.core import config
    if config.CPU_FEATURES is not None:
        flat = config.CPU_FEATURES
    elif config.CPU_NAME not in (None, "host"):
        return set()            # a named generic target: assume nothing
    else:
        import llvmlite.binding as ll
        flat = ll.get_host_cpu_features().flatten()
    return {f[1:] for f in flat.split(",") if f.startswith("+")}


def _pick_isa(features):
    """The widest exact product the target has (see the module docstring)."""
    if {"avx512f", "avx512bw", "avx512vnni"} <= features:
        return "vnni512"
    if "avxvnni" in features or {"avx512vnni", "avx512vl"} <= features:
        return "vnni256"
    if {"avx512f", "avx512bw"} <= features:
        return "avx512bw"
    if "avx2" in features:
        return "avx2"
    return None


ISA = _pick_isa(target_features())
WIDE = ISA in ("vnni512", "avx512bw")
LANES = 16 if WIDE else 8
# Rows per tile: 8 with 32 vector registers; with AVX2's 16, 6 rows (12 accumulators, two
# weight vectors, a broadcast and a product): on Zen 3 about 16% more multiply-adds per
# second than 4 on ResNet-18's b8 224 layers, the same within noise at b2 160
# (benchmarks/bench_int8_layers.py; docs/performance.md, "INT8 on AVX2").
ROWS = 8 if WIDE or "avx512vl" in target_features() else 6
TN = NV * LANES             # output channels per tile
# Bytes per activation: VNNI multiplies bytes; vpmaddwd int16 (bytes widened, exact).
ITEM = 1 if ISA in ("vnni512", "vnni256") else 2
DTYPES = (np.uint8, np.int8) if ITEM == 1 else (np.int16, np.int16)   # activation, weight
PER = 4 // ITEM             # elements per 4-byte block of the reduction


def _dot4(builder, acc, b, w):
    """acc + the dot products of each lane's 4 bytes of ``b`` and ``w``: one vpdpbusd
    (u8 x s8, 4 per lane) or vpmaddwd + add (i16 x i16, 2 per lane)."""
    vec = acc.type
    if ITEM == 1:
        name = f"llvm.x86.avx512.vpdpbusd.{LANES * 32}"
        fn = _declare(builder.module, name, ir.FunctionType(vec, [vec, vec, vec]))
        return builder.call(fn, [acc, b, w])
    v16 = ir.VectorType(ir.IntType(16), LANES * 2)
    name = "llvm.x86.avx512.pmaddw.d.512" if WIDE else "llvm.x86.avx2.pmadd.wd"
    fn = _declare(builder.module, name, ir.FunctionType(vec, [v16, v16]))
    return builder.add(acc, builder.call(fn, [builder.bitcast(b, v16),
                                              builder.bitcast(w, v16)]))


def _declare(module, name, fnty):
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name=name)


def _make_tile(rows):
    """The IR tile for ``rows`` rows: ``acc[acc_off + r*TN + c]`` (int32) = the sum over
    taps ``t`` and bytes ``k < 4*cblocks`` of ``a[offs[offs_off + r] + toff[t] + k]``
    times the packed weight of channel ``c`` (panel at byte ``w_off``, tap-major)."""
    i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
    vec = ir.VectorType(i32, LANES)

    @intrinsic
    def tile(typingctx, acc, acc_off, a, offs, offs_off, toff, cblocks, w, w_off):
        sig = types.void(acc, acc_off, a, offs, offs_off, toff, cblocks, w, w_off)

        def codegen(context, builder, signature, args):
            from numba.core import cgutils
            ptr = [builder.bitcast(context.make_array(signature.args[i])(
                context, builder, args[i]).data, i8p if i in (0, 2, 7) else i64.as_pointer())
                for i in (0, 2, 3, 5, 7)]
            accp, ap, offp, toffp, wp = ptr
            ntaps = context.make_array(signature.args[5])(context, builder, args[5]).nitems
            acc_off, offs_off, cb, w_off = (builder.sext(args[i], i64) if args[i].type.width
                                            < 64 else args[i] for i in (1, 4, 6, 8))
            slots = [cgutils.alloca_once_value(builder, ir.Constant(vec, None))
                     for _ in range(rows * NV)]
            rowp = [builder.gep(ap, [builder.load(builder.gep(offp, [builder.add(
                offs_off, ir.Constant(i64, r))]))]) for r in range(rows)]
            wcur = cgutils.alloca_once_value(builder, builder.gep(wp, [w_off]))
            with cgutils.for_range(builder, ntaps) as taps:
                shift = builder.load(builder.gep(toffp, [taps.index]))
                tap_rows = [builder.gep(p, [shift]) for p in rowp]
                with cgutils.for_range(builder, cb) as loop:
                    wbase = builder.load(wcur)
                    wv = [builder.load(builder.bitcast(builder.gep(wbase, [ir.Constant(
                        i64, j * LANES * 4)]), vec.as_pointer()), align=1) for j in range(NV)]
                    builder.store(builder.gep(wbase, [ir.Constant(i64, TN * 4)]), wcur)
                    k4 = builder.mul(loop.index, ir.Constant(i64, 4))
                    for r in range(rows):
                        s = builder.load(builder.bitcast(builder.gep(tap_rows[r], [k4]),
                                                         i32.as_pointer()), align=1)
                        b = builder.insert_element(ir.Constant(vec, ir.Undefined), s,
                                                   ir.Constant(i32, 0))
                        b = builder.shuffle_vector(b, ir.Constant(vec, ir.Undefined),
                                                   ir.Constant(vec, [0] * LANES))
                        for j in range(NV):
                            slot = slots[r * NV + j]
                            builder.store(_dot4(builder, builder.load(slot), b, wv[j]), slot)
            out = builder.gep(accp, [builder.mul(acc_off, ir.Constant(i64, 4))])
            for r in range(rows):
                for j in range(NV):
                    dst = builder.gep(out, [ir.Constant(i64, (r * TN + j * LANES) * 4)])
                    builder.store(builder.load(slots[r * NV + j]),
                                  builder.bitcast(dst, vec.as_pointer()), align=4)
            return context.get_dummy_value()
        return sig, codegen
    return tile


_tile_full, _tile_one = _make_tile(ROWS), _make_tile(1)


@intrinsic
def _requant_full(typingctx, acc, out, out_off, ldo, table, c0, zp, lo, hi):
    """The epilogue of a full tile, vectorised: ``out[out_off + r*ldo + c0 + c]`` (bytes)
    = clamp(((acc + bias) * m + rnd) >> total + zp) for ROWS x TN accumulators, with
    ``table`` int64 (4, O): bias, m, rnd = 2**(total-1), total per channel."""
    sig = types.void(acc, out, out_off, ldo, table, c0, zp, lo, hi)

    def codegen(context, builder, signature, args):
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        v32, v64, v8 = ir.VectorType(i32, 8), ir.VectorType(i64, 8), ir.VectorType(i8, 8)
        data = [context.make_array(signature.args[i])(context, builder, args[i])
                for i in (0, 1, 4)]
        accp = builder.bitcast(data[0].data, i8.as_pointer())
        outp = builder.bitcast(data[1].data, i8.as_pointer())
        tabp = builder.bitcast(data[2].data, i64.as_pointer())
        o = builder.extract_value(data[2].shape, 1)
        out_off, ldo, c0, zp, lo, hi = (builder.sext(args[i], i64) if args[i].type.width <
                                        64 else args[i] for i in (2, 3, 5, 6, 7, 8))

        def splat(v):
            vec = builder.insert_element(ir.Constant(v64, ir.Undefined), v, ir.Constant(i32, 0))
            return builder.shuffle_vector(vec, ir.Constant(v64, ir.Undefined),
                                          ir.Constant(ir.VectorType(i32, 8), [0] * 8))
        zpv, lov, hiv = splat(zp), splat(lo), splat(hi)
        tab = [[builder.load(builder.bitcast(builder.gep(tabp, [builder.add(builder.mul(
            o, ir.Constant(i64, k)), builder.add(c0, ir.Constant(i64, 8 * q)))]),
            v64.as_pointer()), align=8) for q in range(TN // 8)] for k in range(4)]
        for r in range(ROWS):
            row = builder.gep(outp, [builder.add(out_off, builder.add(c0, builder.mul(
                ldo, ir.Constant(i64, r))))])
            for q in range(TN // 8):
                a = builder.load(builder.bitcast(builder.gep(accp, [ir.Constant(
                    i64, (r * TN + 8 * q) * 4)]), v32.as_pointer()), align=4)
                v = builder.add(builder.sext(a, v64), tab[0][q])
                y = builder.ashr(builder.add(builder.mul(v, tab[1][q]), tab[2][q]), tab[3][q])
                y = builder.add(y, zpv)
                y = builder.select(builder.icmp_signed("<", y, lov), lov, y)
                y = builder.select(builder.icmp_signed(">", y, hiv), hiv, y)
                builder.store(builder.trunc(y, v8), builder.bitcast(builder.gep(row, [
                    ir.Constant(i64, 8 * q)]), v8.as_pointer()), align=1)
        return context.get_dummy_value()
    return sig, codegen

_OPTS = dict(cache=True, error_model="numpy", nogil=True)


@njit(inline="always", **_OPTS)
def _epilogue(acc, rows, out, row0, c0, table, zp, lo, hi):
    """Requantize ``rows`` x (up to TN) accumulators into ``out[row0:, c0:]``: the
    vector epilogue for a full tile, this loop for the edges."""
    o = out.shape[1]
    if rows == ROWS and c0 + TN <= o:
        _requant_full(acc, out, row0 * o, o, table, c0, zp, lo, hi)
        return
    for r in range(rows):
        for j in range(min(TN, o - c0)):
            v = (np.int64(acc[r * TN + j]) + table[0, c0 + j]) * table[1, c0 + j]
            y = ((v + table[2, c0 + j]) >> table[3, c0 + j]) + zp
            out[row0 + r, c0 + j] = lo if y < lo else (hi if y > hi else y)


@njit(inline="always", **_OPTS)
def _row_offsets(offs, row0, n, grid):
    """Byte offsets of the windows of output pixels row0..row0+n-1 (``grid``: OH, OW,
    HP, WP, CP, SH, SW of the padded NHWC input)."""
    oh, ow, hp, wp, cp, sh, sw = grid
    for r in range(n):
        p = row0 + r
        b, rem = p // (oh * ow), p % (oh * ow)
        offs[r] = ((b * hp + (rem // ow) * sh) * wp + (rem % ow) * sw) * cp


@njit(**_OPTS)
def _gemm_tiles(a, grid, toff, cblocks, w, table, zp, lo, hi, out, chunks, t0, t1):
    """Tiles ``t0 <= p < t1`` of out[pixel, o] = requant(sum over taps and channels);
    consecutive tiles share a block of pixels (``chunks`` is the parallel split's)."""
    n_ot = (out.shape[1] + TN - 1) // TN
    panel = toff.size * cblocks * TN * 4
    acc = np.empty(ROWS * TN, np.int32)
    offs = np.empty(ROWS, np.int64)
    for p in range(t0, t1):
        row0, ot = (p // n_ot) * ROWS, p % n_ot
        n = min(ROWS, out.shape[0] - row0)
        _row_offsets(offs, row0, n, grid)
        if n == ROWS:
            _tile_full(acc, 0, a, offs, 0, toff, cblocks, w, ot * panel)
        else:
            for r in range(n):
                _tile_one(acc, r * TN, a, offs, r, toff, cblocks, w, ot * panel)
        _epilogue(acc, n, out, row0, ot * TN, table, zp, lo, hi)


@njit(parallel=True, **_OPTS)
def _gemm(a, grid, toff, cblocks, w, table, zp, lo, hi, out, chunks):
    """``_gemm_tiles`` over all tiles, in ``chunks`` parallel runs of consecutive tiles."""
    total = -(-out.shape[0] // ROWS) * -(-out.shape[1] // TN)
    for c in prange(chunks):
        _gemm_tiles(a, grid, toff, cblocks, w, table, zp, lo, hi, out, chunks,
                    c * total // chunks, (c + 1) * total // chunks)


class Packed:
    """Weights packed for the kernels: ``data`` int8 [O/TN][taps][CP/4][TN][4] (flat);
    ``taps`` kernel taps (1 for a GEMM), ``c`` channels per tap, ``cp`` those rounded up
    to 4 (the padding channels hold zero weights), ``colsum`` int64 (O,); ``matrix``
    the same weights as a plain int8 (O, taps*CP) matrix, taps channels last, for an
    external GEMM (``lezero.kernels.int8_blocks``)."""

    def __init__(self, data, out_features, taps, c, colsum, matrix=None):
        self.data, self.out_features, self.taps, self.c = data, out_features, taps, c
        self.cp, self.colsum, self.matrix = -(-c // PER) * PER, colsum, matrix


def pack(w):
    """Pack int8 weights (zero point 0) once, at conversion time: (O, K) for a GEMM, or
    (O, KH, KW, C) -- channels last -- for a convolution over NHWC data."""
    argcheck.arrays("int8_gemm.pack", w=w)
    argcheck.dtype_is("int8_gemm.pack", "w", w, np.int8)
    argcheck.ndim_is("int8_gemm.pack", "w", w, 2, 4)
    o, c = w.shape[0], w.shape[-1]
    taps = int(np.prod(w.shape[1:-1], dtype=np.int64))
    cp, op = -(-c // PER) * PER, -(-o // TN) * TN
    buf = np.zeros((op, taps, cp), DTYPES[1])
    buf[:o, :, :c] = w.reshape(o, taps, c)
    data = buf.reshape(op // TN, TN, taps * cp // PER, PER).transpose(0, 2, 1, 3)
    return Packed(np.ascontiguousarray(data).reshape(-1), o, taps, c,
                  w.reshape(o, -1).sum(axis=1, dtype=np.int64),
                  np.ascontiguousarray(buf[:o].reshape(o, taps * cp), dtype=np.int8))


def bias_for(packed, bias_q, x_zp):
    """The epilogue's int64 bias: ``bias_q - x_zp * colsum(w)`` (the zero point folded)."""
    return np.asarray(bias_q, np.int64) - np.int64(x_zp) * packed.colsum


def _table(bias, m, shift):
    """The epilogue's per-channel int64 rows: bias, multiplier, rounding term, shift
    (``fixed_point.mbqm``: (x*m + 2**(t-1)) >> t with t = 31 - shift)."""
    total = 31 - shift.astype(np.int64)
    return np.stack([bias.astype(np.int64), m.astype(np.int64),
                     np.left_shift(np.int64(1), total - 1), total])


def checked_table(op, o, bias, m, shift, lo, hi, dtype):
    """``_table`` for ``o`` channels, after the checks the epilogue relies on: one entry
    per channel, shifts in [-31, 30] (a shift of 1..62 bits), multipliers >= 0, and a
    clamp inside ``dtype``."""
    argcheck.arrays(op, bias=bias, m=m, shift=shift)
    for name, t in (("bias", bias), ("m", m), ("shift", shift)):
        argcheck.shape_is(op, name, t, (o,))
    if o and (int(shift.min()) < -31 or int(shift.max()) > 30 or int(m.min()) < 0):
        raise ValueError(f"{op}: shifts must lie in [-31, 30] and multipliers be >= 0, "
                         f"got shift in [{int(shift.min())}, {int(shift.max())}]")
    info = np.iinfo(dtype)
    if not info.min <= int(lo) <= int(hi) <= info.max:
        raise ValueError(f"{op}: the clamp [{lo}, {hi}] must lie within {np.dtype(dtype)}")
    return _table(bias, m, shift)


def _run(op, a, grid, toff, cblocks, packed, bias, m, shift, zp, lo, hi, dtype, rows):
    """Check what the kernel relies on besides the geometry, then run it."""
    if ISA is None:
        raise RuntimeError(f"{op}: this CPU target has no VNNI (vpdpbusd); use the int16 "
                           "kernels of lezero.quantization.kernels")
    argcheck.arrays(op, a=a)
    argcheck.dtype_is(op, "a", a, DTYPES[0])
    argcheck.c_contiguous(op, "a", a)
    o = packed.out_features
    table = checked_table(op, o, bias, m, shift, lo, hi, dtype)
    out = np.empty((rows, o), dtype)
    tiles = -(-rows // ROWS) * -(-o // TN)
    if tiles:
        from lezero.runtime import launch
        launch(_gemm, _gemm_tiles, rows * o * len(toff) * cblocks * 4, tiles, a.reshape(-1),
               np.array(grid, np.int64), np.asarray(toff, np.int64), cblocks,
               packed.data, table, np.int64(zp), np.int64(lo), np.int64(hi), out,
               min(tiles, 4 * get_num_threads()))
    return out


def gemm_requant(a, packed, bias, m, shift, zp, lo, hi, dtype):
    """``requant(a @ W.T)``: ``a`` uint8 (M, cp) C-contiguous (columns past K meet zero
    weights), weights packed from (O, K); ``bias`` int64 from ``bias_for``, ``m`` and
    ``shift`` per output channel.  Returns (M, O) of ``dtype`` (uint8 or int8)."""
    op = "int8_gemm.gemm_requant"
    argcheck.arrays(op, a=a)
    argcheck.ndim_is(op, "a", a, 2)
    if packed.taps != 1 or a.shape[1] != packed.cp:
        raise ValueError(f"{op}: a must have {packed.cp} columns (K={packed.c} rounded up "
                         f"to 4) for these weights, got shape {a.shape}")
    grid = (1, 1, 1, 1, packed.cp * ITEM, 1, 1)
    return _run(op, a, grid, (0,), packed.cp // PER, packed, bias, m, shift, zp, lo, hi, dtype,
                a.shape[0])


def conv_requant(xp, geo, packed, bias, m, shift, zp, lo, hi, dtype):
    """The convolution of an NHWC uint8 input ``xp`` (N, HP, WP, CP) already padded
    (with its zero point) -- no patch matrix: each tile reads its windows in place.
    ``geo`` as ``quantization.reference.geometry`` with the padding already applied
    (ph = pw = 0).  Returns (N*OH*OW, O)."""
    op = "int8_gemm.conv_requant"
    argcheck.arrays(op, xp=xp)
    argcheck.ndim_is(op, "xp", xp, 4)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = argcheck.ints(op, "geo", geo, 10)
    argcheck.windows(op, xp.shape[1:3], (oh, ow), (kh, kw), (sh, sw), (0, 0), (dh, dw))
    if (ph, pw) != (0, 0) or kh * kw != packed.taps or xp.shape[3] != packed.cp:
        raise ValueError(f"{op}: the padded input must have {packed.cp} channels and the "
                         f"window {packed.taps} taps with padding 0, got xp {xp.shape} and "
                         f"geo {geo}")
    if (oh - 1) * sh + (kh - 1) * dh >= xp.shape[1] or \
            (ow - 1) * sw + (kw - 1) * dw >= xp.shape[2]:
        raise ValueError(f"{op}: the windows of geo {geo} reach past xp {xp.shape}")
    n, hp, wp, cp = xp.shape
    row = cp * ITEM                 # bytes per pixel
    if dw == 1:     # a kernel row's taps are contiguous: KW pixels, one run of blocks
        toff, cblocks = [i * dh * wp * row for i in range(kh)], kw * cp // PER
    else:
        toff, cblocks = [(i * dh * wp + j * dw) * row for i in range(kh)
                         for j in range(kw)], cp // PER
    return _run(op, xp, (oh, ow, hp, wp, row, sh, sw), toff, cblocks, packed, bias, m, shift,
                zp, lo, hi, dtype, n * oh * ow)
