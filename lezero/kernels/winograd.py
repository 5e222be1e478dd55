"""Winograd minimal filtering F(m x m, r x r): transform matrices and tile transforms.

One output tile of ``m x m`` is computed from an input tile of ``alpha = m + r - 1`` by

    Y = AT [ (G g G^T) * (BT d BT^T) ] AT^T          (* elementwise, Lavin & Gray 2016)

The matrices come from the Toom-Cook construction (``winograd_matrices``): evaluate at
``alpha - 1`` finite points and infinity, multiply pointwise, interpolate back, and take the
transpose of that convolution algorithm to get a correlation.

Two tile transforms cover the forward pass *and* both gradients:

``tiles_in(x, T, out, step, py, px, th, tw)``
    cut ``x`` (N, C, H, W) into ``th x tw`` tiles of ``a = T.shape[1]`` pixels at stride
    ``step``, the first one starting at ``(-py, -px)`` (zeros outside ``x``), and store
    ``T tile T^T`` into ``out[(i * alpha + j), c, (n * th + ty) * tw + tx]``.
    Forward: ``T = BT`` on the input.  Backward: ``T = AT^T`` on the output gradient.
``tiles_out(V, T, y, step, oy, ox, th, tw)``
    the reverse: ``T V_tile T^T`` (``a x a`` with ``a = T.shape[0]``) is *added* into ``y``
    at ``(ty * step - oy, tx * step - ox)``, dropping what falls outside.  Forward: ``T = AT``
    (tiles do not overlap).  Gradient of the input: ``T = BT^T`` (tiles overlap and add).

The layout ``(alpha*alpha, C, tiles)`` makes the channel contraction one batched GEMM per
tile position.  Numba kernels run in parallel over ``(n, c)`` planes; within a plane they
gather the tiles so that both passes of the separable transform (columns, then rows) are
long vectorizable loops over the tile index.
"""
from fractions import Fraction
from math import lcm

import numpy as np

from lezero.kernels import argcheck, jit, prange, uint64
from lezero.runtime import launch, policy
from lezero.kernels.im2col import use_kernel

# Interpolation points besides infinity.  For F(4, 3) the mixed set {0, +-1, 1/2, -2} gave
# the smallest float32 error on random 6x6 tiles (mean worst error 3.1e-6, against 4.2e-6
# for Lavin & Gray's {0, +-1, +-2} and 5.0e-6 for {0, +-1, +-1/2}).
POINTS = {2: (0, 1, -1), 4: (0, 1, -1, Fraction(1, 2), -2)}


def _vandermonde(points, cols):
    rows = [[Fraction(p) ** j for j in range(cols)] for p in points]
    rows.append([Fraction(0)] * (cols - 1) + [Fraction(1)])      # the point at infinity
    return rows


def _inverse(a):
    """Exact inverse of a square matrix of Fractions (Gauss-Jordan)."""
    n = len(a)
    m = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        piv = next(r for r in range(col, n) if m[r][col] != 0)
        m[col], m[piv] = m[piv], m[col]
        inv = 1 / m[col][col]
        m[col] = [v * inv for v in m[col]]
        for r in range(n):
            if r != col and m[r][col] != 0:
                f = m[r][col]
                m[r] = [v - f * w for v, w in zip(m[r], m[col])]
    return [row[n:] for row in m]


def winograd_matrices(m, r=3, points=None):
    """``(AT, G, BT)`` as float64 arrays for F(m, r): shapes (m, alpha), (alpha, r),
    (alpha, alpha).  Exact rational arithmetic, then each row of BT is scaled to integers
    (and the matching row of G divided), which keeps the data transform cheap and exact."""
    points = POINTS[m] if points is None else points
    alpha = m + r - 1
    if len(points) != alpha - 1:
        raise ValueError(f"winograd_matrices: F({m},{r}) needs {alpha - 1} points, "
                         f"got {len(points)}")
    e_g = _vandermonde(points, r)                  # evaluate the filter polynomial
    e_h = _vandermonde(points, m)                  # evaluate the output polynomial
    # Interpolation: coefficients of s(x) from its values; s = q + s_inf * prod(x - p).
    vf = [[Fraction(p) ** j for j in range(alpha - 1)] for p in points]
    inv = _inverse(vf)
    poly = [Fraction(1)]
    for p in points:                                 # prod (x - p), ascending coefficients
        poly = [(poly[i - 1] if i > 0 else 0) - Fraction(p) * (poly[i] if i < len(poly) else 0)
                for i in range(len(poly) + 1)]
    interp = [inv[i] + [poly[i]] for i in range(alpha - 1)] + [[Fraction(0)] * (alpha - 1)
                                                               + [poly[alpha - 1]]]
    bt = [[interp[j][i] for j in range(alpha)] for i in range(alpha)]   # BT = interp^T
    at = [[e_h[j][i] for j in range(alpha)] for i in range(m)]          # AT = E_h^T
    g = [list(row) for row in e_g]
    for i in range(alpha):
        scale = lcm(*[v.denominator for v in bt[i]])
        bt[i] = [v * scale for v in bt[i]]
        g[i] = [v / scale for v in g[i]]
    return (np.array(at, dtype=np.float64), np.array(g, dtype=np.float64),
            np.array(bt, dtype=np.float64))


# ----- NumPy references (also the CuPy path) ------------------------------------------------

def _module_of(a):
    from lezero.cuda import get_array_module
    return get_array_module(a)


def tiles_in_ref(x, T, out, step, py, px, th, tw):
    """Reference of ``tiles_in`` with slicing and one einsum."""
    xp = _module_of(x)
    N, C, H, W = x.shape
    alpha, a = T.shape
    hc, wc = (th - 1) * step + a, (tw - 1) * step + a     # canvas the tiles cover
    canvas = xp.zeros((N, C, hc, wc), dtype=x.dtype)
    y0, y1 = max(0, py), min(hc, H + py)                  # canvas row j holds x row j - py
    x0, x1 = max(0, px), min(wc, W + px)
    if y1 > y0 and x1 > x0:
        canvas[:, :, y0:y1, x0:x1] = x[:, :, y0 - py:y1 - py, x0 - px:x1 - px]
    tiles = xp.stack([xp.stack([canvas[:, :, k:k + (th - 1) * step + 1:step,
                                       l:l + (tw - 1) * step + 1:step] for l in range(a)])
                      for k in range(a)])                 # (a, a, N, C, th, tw)
    Tx = xp.asarray(T, dtype=x.dtype)
    v = xp.einsum("ik,jl,klncyx->ijcnyx", Tx, Tx, tiles)
    out[...] = v.reshape(alpha * alpha, C, N * th * tw)
    return out


def tiles_out_ref(V, T, y, step, oy, ox, th, tw):
    """Reference of ``tiles_out``: einsum, then strided overlap-add on a canvas."""
    xp = _module_of(y)
    N, C, H, W = y.shape
    a, alpha = T.shape
    Tx = xp.asarray(T, dtype=y.dtype)
    v = V.reshape(alpha, alpha, C, N, th, tw)
    z = xp.einsum("ri,cj,ijknyx->rcnkyx", Tx, Tx, v)      # (a, a, N, C, th, tw)
    hc, wc = (th - 1) * step + a, (tw - 1) * step + a
    canvas = xp.zeros((N, C, hc, wc), dtype=y.dtype)
    for r in range(a):
        for c in range(a):
            canvas[:, :, r:r + (th - 1) * step + 1:step, c:c + (tw - 1) * step + 1:step] += z[r, c]
    y0, y1 = max(0, -oy), min(H, hc - oy)                 # rows of y the canvas reaches
    x0, x1 = max(0, -ox), min(W, wc - ox)
    if y1 > y0 and x1 > x0:
        y[:, :, y0:y1, x0:x1] += canvas[:, :, y0 + oy:y1 + oy, x0 + ox:x1 + ox]
    return y


# ----- Numba kernels ---------------------------------------------------------------------------

@jit(cache=True, inline="always")
def _lincomb(dst, e0, e1, e2, T, r, n, src, o0, s0, o1, s1, o2, nt):
    """``dst[e0, e1, e2 + t] = sum_q T[r, q] * src[o0 + q*s0, o1 + q*s1, o2 + t]`` for
    ``t < nt``.  Unrolled for the transform sizes that occur (2, 4, 6 terms), so each
    output row is one vectorisable pass; indices are unsigned so that Numba leaves out
    its negative-index test (which would keep LLVM from vectorising)."""
    d0, d1, d2 = uint64(e0), uint64(e1), uint64(e2)
    i0, i1, i2 = uint64(o0), uint64(o1), uint64(o2)
    u0, u1 = uint64(s0), uint64(s1)
    if n == 6:
        c0, c1, c2, c3, c4, c5 = T[r, 0], T[r, 1], T[r, 2], T[r, 3], T[r, 4], T[r, 5]
        for t in range(nt):
            ut = uint64(t)
            dst[d0, d1, d2 + ut] = (c0 * src[i0, i1, i2 + ut]
                                    + c1 * src[i0 + u0, i1 + u1, i2 + ut]
                                    + c2 * src[i0 + 2 * u0, i1 + 2 * u1, i2 + ut]
                                    + c3 * src[i0 + 3 * u0, i1 + 3 * u1, i2 + ut]
                                    + c4 * src[i0 + 4 * u0, i1 + 4 * u1, i2 + ut]
                                    + c5 * src[i0 + 5 * u0, i1 + 5 * u1, i2 + ut])
    elif n == 4:
        c0, c1, c2, c3 = T[r, 0], T[r, 1], T[r, 2], T[r, 3]
        for t in range(nt):
            ut = uint64(t)
            dst[d0, d1, d2 + ut] = (c0 * src[i0, i1, i2 + ut]
                                    + c1 * src[i0 + u0, i1 + u1, i2 + ut]
                                    + c2 * src[i0 + 2 * u0, i1 + 2 * u1, i2 + ut]
                                    + c3 * src[i0 + 3 * u0, i1 + 3 * u1, i2 + ut])
    elif n == 2:
        c0, c1 = T[r, 0], T[r, 1]
        for t in range(nt):
            ut = uint64(t)
            dst[d0, d1, d2 + ut] = (c0 * src[i0, i1, i2 + ut]
                                    + c1 * src[i0 + u0, i1 + u1, i2 + ut])
    else:
        for t in range(nt):
            ut = uint64(t)
            acc = 0.0
            for q in range(n):
                uq = uint64(q)
                acc += T[r, q] * src[i0 + uq * u0, i1 + uq * u1, i2 + ut]
            dst[d0, d1, d2 + ut] = acc

# Planes transformed together: a block's buffers hold about this many floats (~256 KB,
# half an L2 cache), so that each tile position's row of the result is written as one
# run over the block's planes instead of one short run per plane: 36 rows written a
# plane at a time, far apart in a large result, were written several times slower than
# the memory allows (docs/performance.md, "Winograd: tiles a block of planes").
BLOCK_FLOATS = 1 << 16


def plane_block(nt, rows, block_floats=BLOCK_FLOATS):
    """How many planes of ``nt`` tiles a block holds, each plane needing ``rows`` rows of
    buffers (``block_floats`` 0: one plane, the kernels' layout before blocks)."""
    return max(1, block_floats // (rows * nt))


@jit(cache=True, inline="always")
def _tile_grid(buf, tiles, at, step, th, tw, gather):
    """Between a plane buffer and its tiles, ``tiles[k, l, at + ty * tw + tx]`` being the
    buffer's ``(ty * step + k, tx * step + l)``: gather them (``gather``), or add them
    back into the buffer (where tiles overlap, they sum)."""
    ustep = uint64(step)
    for k in range(tiles.shape[0]):
        for l in range(tiles.shape[1]):
            for ty in range(th):
                brow, trow = uint64(ty * step + k), at + uint64(ty * tw)
                for tx in range(tw):
                    ux = uint64(tx)
                    if gather:
                        tiles[k, l, trow + ux] = buf[brow, ux * ustep + uint64(l)]
                    else:
                        buf[brow, ux * ustep + uint64(l)] += tiles[k, l, trow + ux]


@jit(cache=True, nogil=True)
def tiles_in_planes(x, T, out, step, py, px, th, tw, per, first, stop):
    """Numba ``tiles_in`` for the (n, c) planes ``first <= c * N + n < stop``, ``per``
    planes at a time (``plane_block``): copy each plane into a zero-bordered buffer and
    gather its tiles as ``d[k, l, tile]``, then run both passes of the separable
    transform over the block's tiles (long contiguous loops).  ``out`` must be
    C-contiguous: the planes ``c * N + n`` follow each other in each of its rows."""
    N, C, H, W = x.shape
    alpha, a = T.shape
    nt = th * tw
    hb, wb = (th - 1) * step + a, (tw - 1) * step + a
    y0, y1 = max(0, py), min(hb, H + py)      # buffer rows/cols that hold x
    x0, x1 = max(0, px), min(wb, W + px)
    buf = np.zeros((hb, wb), dtype=x.dtype)   # its border stays zero: padding
    d = np.empty((a, a, per * nt), dtype=x.dtype)
    tmp = np.empty((alpha, a, per * nt), dtype=x.dtype)
    rows = out.reshape((alpha * alpha, 1, out.shape[1] * out.shape[2]))
    for b0 in range(first, stop, per):
        b1 = min(b0 + per, stop)
        for nc in range(b0, b1):
            c = nc // N          # channel-major: consecutive planes write adjacent columns
            n = nc - c * N
            # unsigned indices: no negative-index tests, so these loops vectorise
            for r in range(y0, y1):
                row = uint64(r - py)
                for q in range(x1 - x0):
                    uq = uint64(q)
                    buf[r, uint64(x0) + uq] = x[n, c, row, uint64(x0 - px) + uq]
            _tile_grid(buf, d, uint64((nc - b0) * nt), step, th, tw, True)
        count = (b1 - b0) * nt
        for i in range(alpha):                  # vertical: tmp[i, l] = sum_k T[i, k] d[k, l]
            for l in range(a):
                _lincomb(tmp, i, l, 0, T, i, a, d, 0, 1, l, 0, 0, count)
        for i in range(alpha):                  # horizontal: out[i,j] = sum_l T[j,l] tmp[i,l]
            for j in range(alpha):
                _lincomb(rows, i * alpha + j, 0, b0 * nt, T, j, a, tmp, i, 0, 0, 1, 0, count)


@jit(cache=True, parallel=True)
def tiles_in_nb(x, T, out, step, py, px, th, tw, per):
    """``tiles_in`` over blocks of planes in parallel (blocks write disjoint columns)."""
    planes = x.shape[0] * x.shape[1]
    for blk in prange((planes + per - 1) // per):
        tiles_in_planes(x, T, out, step, py, px, th, tw, per, blk * per,
                        min(blk * per + per, planes))


@jit(cache=True, nogil=True)
def tiles_out_planes(V, T, y, step, oy, ox, th, tw, per, first, stop):
    """Numba ``tiles_out`` for planes ``first..stop``, ``per`` planes at a time (as
    ``tiles_in_planes``; ``V`` C-contiguous): both passes over the block's tiles, then
    each plane's tiles are added into a plane buffer (overlaps sum) whose visible part
    is added into ``y``."""
    N, C, H, W = y.shape
    a, alpha = T.shape
    nt = th * tw
    hb, wb = (th - 1) * step + a, (tw - 1) * step + a
    y0, y1 = max(0, oy), min(hb, H + oy)      # buffer rows/cols that land in y
    x0, x1 = max(0, ox), min(wb, W + ox)
    r1 = np.empty((alpha, a, per * nt), dtype=y.dtype)
    z = np.empty((a, a, per * nt), dtype=y.dtype)
    buf = np.empty((hb, wb), dtype=y.dtype)
    rows = V.reshape((alpha * alpha, 1, V.shape[1] * V.shape[2]))
    for b0 in range(first, stop, per):
        b1 = min(b0 + per, stop)
        count = (b1 - b0) * nt
        for i in range(alpha):                  # horizontal: r1[i, cc] = sum_j T[cc, j] V[i, j]
            for cc in range(a):
                _lincomb(r1, i, cc, 0, T, cc, alpha, rows, i * alpha, 1, 0, 0, b0 * nt, count)
        for r in range(a):                      # vertical: z[r, cc] = sum_i T[r, i] r1[i, cc]
            for cc in range(a):
                _lincomb(z, r, cc, 0, T, r, alpha, r1, 0, 1, cc, 0, 0, count)
        for nc in range(b0, b1):
            c = nc // N          # channel-major: consecutive planes read adjacent columns
            n = nc - c * N
            buf[:, :] = 0
            _tile_grid(buf, z, uint64((nc - b0) * nt), step, th, tw, False)
            for r in range(y0, y1):
                row = uint64(r - oy)
                for q in range(x1 - x0):
                    uq = uint64(q)
                    y[n, c, row, uint64(x0 - ox) + uq] += buf[r, uint64(x0) + uq]


@jit(cache=True, parallel=True)
def tiles_out_nb(V, T, y, step, oy, ox, th, tw, per):
    """``tiles_out`` over blocks of planes in parallel: each plane of ``y`` has one
    writer."""
    planes = y.shape[0] * y.shape[1]
    for blk in prange((planes + per - 1) // per):
        tiles_out_planes(V, T, y, step, oy, ox, th, tw, per, blk * per,
                         min(blk * per + per, planes))


def check_tiles(op, image, T, tiles, step, offsets, th, tw, transposed):
    """Check an image (N, C, H, W), the transform ``T`` and the transformed ``tiles``
    (alpha^2, C, N * th * tw) against each other: the kernels index ``tiles`` by
    (tile position, channel, tile) and the image's buffer by unsigned offsets.  ``T`` is
    (alpha, a) for ``tiles_in`` and (a, alpha) for ``tiles_out`` (``transposed``).
    Returns (step, offsets..., th, tw) as ints."""
    argcheck.arrays(op, image=image, T=T, tiles=tiles)
    argcheck.ndim_is(op, "image", image, 4)
    argcheck.ndim_is(op, "T", T, 2)
    argcheck.floats(op, "image", image)
    argcheck.dtype_is(op, "tiles", tiles, image.dtype)
    step, oy, ox, th, tw = argcheck.ints(op, "(step, offsets, tiles)",
                                         (step, *offsets, th, tw), 5)
    if min(step, th, tw, *T.shape) < 1:
        raise ValueError(f"{op}: step, the tile counts and T's sizes must be at least 1, "
                         f"got step={step}, th={th}, tw={tw}, T {T.shape}")
    alpha = T.shape[1] if transposed else T.shape[0]
    n, c = image.shape[:2]
    argcheck.shape_is(op, "tiles", tiles, (alpha * alpha, c, n * th * tw))
    return step, oy, ox, th, tw


def tiles_in_numba(x, T, out, step, py, px, th, tw, block_floats=BLOCK_FLOATS):
    """``tiles_in`` on the kernels, ``plane_block(..., block_floats)`` planes at a time."""
    step, py, px, th, tw = check_tiles("tiles_in_numba", x, T, out, step, (py, px), th, tw,
                                       False)
    argcheck.c_contiguous("tiles_in_numba", "out", out)   # the kernel writes rows of it
    alpha, a = T.shape
    per = plane_block(th * tw, alpha * a + a * a, block_floats)
    launch(tiles_in_nb, tiles_in_planes, out.size, x.shape[0] * x.shape[1],
           x, np.ascontiguousarray(T, dtype=x.dtype), out, step, py, px, th, tw, per,
           min_part=policy.gather_min_part_items)
    return out


def tiles_out_numba(V, T, y, step, oy, ox, th, tw, block_floats=BLOCK_FLOATS):
    """``tiles_out`` on the kernels, ``plane_block(..., block_floats)`` planes at a time."""
    step, oy, ox, th, tw = check_tiles("tiles_out_numba", y, T, V, step, (oy, ox), th, tw,
                                       True)
    argcheck.c_contiguous("tiles_out_numba", "V", V)      # the kernel reads rows of it
    a, alpha = T.shape
    per = plane_block(th * tw, alpha * a + a * a, block_floats)
    launch(tiles_out_nb, tiles_out_planes, V.size, y.shape[0] * y.shape[1],
           V, np.ascontiguousarray(T, dtype=y.dtype), y, step, oy, ox, th, tw, per,
           min_part=policy.gather_min_part_items)
    return y


# ----- dispatch (``use_numba`` as in ``im2col``: None asks ``kernels.enabled``) ---------

def tiles_in(x, T, out, step, py, px, th, tw, use_numba=None):
    """Forward tile transform (see the module docstring): the kernel where it may run."""
    fn = tiles_in_numba if use_kernel(x, use_numba) else tiles_in_ref
    return fn(x, T, out, step, py, px, th, tw)


def tiles_out(V, T, y, step, oy, ox, th, tw, use_numba=None):
    """Inverse tile transform, added into ``y``: the kernel where it may run."""
    fn = tiles_out_numba if use_kernel(y, use_numba) else tiles_out_ref
    return fn(V, T, y, step, oy, ox, th, tw)
