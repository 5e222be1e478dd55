"""The convolution kernels: every Numba kernel against its NumPy reference, the references
against brute force, and the Winograd matrices against the definition."""
import itertools

import numpy as np
import pytest

from lezero.kernels import conv_direct as dk
from lezero.kernels import numba_available
from lezero.kernels import im2col as ik
from lezero.kernels import winograd as wk

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

# (x shape (N, C, D, H, W), kernel, stride, pad_lo, dilation)
GEOMETRIES = [
    ((2, 3, 1, 6, 7), (1, 3, 3), (1, 1, 1), (0, 1, 1), (1, 1, 1)),
    ((1, 2, 1, 9, 8), (1, 3, 2), (1, 2, 3), (0, 2, 0), (1, 2, 1)),
    ((2, 2, 1, 1, 11), (1, 1, 4), (1, 1, 2), (0, 0, 3), (1, 1, 2)),       # conv1d as 2-D
    ((1, 2, 4, 5, 3), (2, 3, 2), (2, 1, 1), (1, 1, 1), (1, 1, 2)),        # 3-D
    ((1, 1, 1, 4, 4), (1, 2, 2), (1, 3, 3), (0, 0, 0), (1, 1, 1)),        # stride > kernel
]


def _geo(shape, kernel, stride, pad, dil):
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, k, s, p, d in zip(shape[2:], kernel, stride, pad, dil))
    return kernel + stride + pad + dil + out


def _brute_im2col(x, geo):
    """Patches by the definition, one element at a time."""
    k, s, p, d, out = geo[0:3], geo[3:6], geo[6:9], geo[9:12], geo[12:15]
    N, C = x.shape[:2]
    K, L = int(np.prod(k)), int(np.prod(out))
    col = np.zeros((C * K, N, L))
    for n, c in itertools.product(range(N), range(C)):
        for q, tap in enumerate(itertools.product(*map(range, k))):
            for l, o in enumerate(itertools.product(*map(range, out))):
                idx = [o[i] * s[i] - p[i] + tap[i] * d[i] for i in range(3)]
                if all(0 <= idx[i] < x.shape[2 + i] for i in range(3)):
                    col[c * K + q, n, l] = x[(n, c) + tuple(idx)]
    return col


@pytest.mark.parametrize("case", GEOMETRIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_im2col_kernel_matches_reference_and_definition(case, dtype):
    geo = _geo(*case)
    x = np.random.default_rng(0).standard_normal(case[0]).astype(dtype)
    K, L = int(np.prod(geo[0:3])), int(np.prod(geo[12:15]))
    ref = ik.im2col_ref(x, np.empty((x.shape[1] * K, x.shape[0], L), dtype), geo)
    np.testing.assert_array_equal(ref, _brute_im2col(x, geo).astype(dtype))
    fast = ik.im2col(x, np.full_like(ref, np.nan), geo, use_numba=True)
    np.testing.assert_array_equal(fast, ref)
    # unfold writes through a transposed view of an (N, C*K, L) array
    out = np.full((x.shape[0], x.shape[1] * K, L), np.nan, dtype)
    ik.im2col(x, out.transpose(1, 0, 2), geo, use_numba=True)
    np.testing.assert_array_equal(out.transpose(1, 0, 2), ref)


@pytest.mark.parametrize("case", GEOMETRIES)
def test_col2im_kernel_is_the_adjoint_of_im2col(case):
    geo = _geo(*case)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(case[0])
    K, L = int(np.prod(geo[0:3])), int(np.prod(geo[12:15]))
    col = rng.standard_normal((x.shape[1] * K, x.shape[0], L))
    ref = ik.col2im_ref(col, np.zeros_like(x), geo)
    fast = ik.col2im(col, np.zeros_like(x), geo, use_numba=True)
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12)
    # <im2col(x), col> == <x, col2im(col)>
    lhs = np.sum(_brute_im2col(x, geo) * col)
    assert np.isclose(lhs, np.sum(x * ref), rtol=1e-10)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_matrices_compute_a_correlation(m):
    at, g, bt = wk.winograd_matrices(m)
    rng = np.random.default_rng(2)
    d, f = rng.standard_normal(m + 2), rng.standard_normal(3)
    y = at @ ((g @ f) * (bt @ d))
    np.testing.assert_allclose(y, [d[i:i + 3] @ f for i in range(m)], rtol=1e-12, atol=1e-12)
    # 2-D nesting
    D, Fk = rng.standard_normal((m + 2, m + 2)), rng.standard_normal((3, 3))
    Y = at @ ((g @ Fk @ g.T) * (bt @ D @ bt.T)) @ at.T
    ref = [[np.sum(D[i:i + 3, j:j + 3] * Fk) for j in range(m)] for i in range(m)]
    np.testing.assert_allclose(Y, ref, rtol=1e-11, atol=1e-11)
    assert np.all(bt == np.round(bt)), "the data transform is scaled to integers"


def test_winograd_matrices_reject_a_wrong_number_of_points():
    with pytest.raises(ValueError, match="needs 5 points"):
        wk.winograd_matrices(4, 3, points=(0, 1, -1))


def _brute_tiles_in(x, T, step, py, px, th, tw):
    N, C, H, W = x.shape
    alpha, a = T.shape
    out = np.zeros((alpha * alpha, C, N * th * tw))
    for n, c, ty, tx in itertools.product(range(N), range(C), range(th), range(tw)):
        tile = np.zeros((a, a))
        for k, l in itertools.product(range(a), range(a)):
            iy, ix = ty * step + k - py, tx * step + l - px
            if 0 <= iy < H and 0 <= ix < W:
                tile[k, l] = x[n, c, iy, ix]
        out[:, c, (n * th + ty) * tw + tx] = (T @ tile @ T.T).ravel()
    return out


def _brute_tiles_out(V, T, shape, step, oy, ox, th, tw):
    N, C, H, W = shape
    a, alpha = T.shape
    y = np.zeros(shape)
    for n, c, ty, tx in itertools.product(range(N), range(C), range(th), range(tw)):
        z = T @ V[:, c, (n * th + ty) * tw + tx].reshape(alpha, alpha) @ T.T
        for r, q in itertools.product(range(a), range(a)):
            iy, ix = ty * step + r - oy, tx * step + q - ox
            if 0 <= iy < H and 0 <= ix < W:
                y[n, c, iy, ix] += z[r, q]
    return y


# (x shape, m, py, px, th, tw): offsets inside, at and beyond the edges
TILINGS = [((2, 3, 7, 9), 2, 1, 1, 4, 5), ((1, 2, 7, 9), 4, 1, 2, 2, 3),
           ((1, 2, 5, 5), 4, -1, 3, 3, 1), ((2, 1, 6, 6), 2, 0, 0, 3, 3)]


@pytest.mark.parametrize("shape,m,py,px,th,tw", TILINGS)
@pytest.mark.parametrize("which", ["data", "grad"])
def test_tile_transforms_match_reference_and_definition(shape, m, py, px, th, tw, which):
    at, _, bt = wk.winograd_matrices(m)
    T_in = bt if which == "data" else at.T          # forward: BT; gradient of y: AT^T
    T_out = at if which == "data" else bt.T
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    alpha = m + 2
    v_shape = (alpha * alpha, shape[1], shape[0] * th * tw)
    brute = _brute_tiles_in(x, T_in, m, py, px, th, tw)
    ref = wk.tiles_in_ref(x, T_in, np.empty(v_shape), m, py, px, th, tw)
    fast = wk.tiles_in(x, T_in, np.empty(v_shape), m, py, px, th, tw, use_numba=True)
    np.testing.assert_allclose(ref, brute, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fast, brute, rtol=1e-12, atol=1e-12)

    V = rng.standard_normal(v_shape)
    brute = _brute_tiles_out(V, T_out, shape, m, py, px, th, tw)
    ref = wk.tiles_out_ref(V, T_out, np.zeros(shape), m, py, px, th, tw)
    fast = wk.tiles_out(V, T_out, np.zeros(shape), m, py, px, th, tw, use_numba=True)
    np.testing.assert_allclose(ref, brute, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(fast, brute, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("block_floats", [wk.BLOCK_FLOATS, 6 * 40 * 100, 0])
def test_tile_kernels_in_blocks_of_planes(block_floats):
    """The kernels transform a block of planes at a time (``plane_block``): the default
    block, one of six planes, one plane; several blocks, a short last one, and parts that
    start inside a block (the worker threads' ranges) give the reference's tiles, both
    ways."""
    at, _, bt = wk.winograd_matrices(4)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 13, 40, 40))
    th = tw = 10
    ranges = ((0, 5), (5, 17), (17, 26))
    want = wk.tiles_in_ref(x, bt, np.empty((36, 13, 2 * th * tw)), 4, 1, 1, th, tw)
    got = np.full_like(want, np.nan)
    per = wk.plane_block(th * tw, 6 * 6 + 6 * 6, block_floats)
    for lo, hi in ranges:
        wk.tiles_in_planes(x, bt, got, 4, 1, 1, th, tw, per, lo, hi)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(wk.tiles_in_numba(x, bt, np.empty_like(want), 4, 1, 1, th, tw,
                                                 block_floats), want, rtol=1e-12, atol=1e-12)
    y_want = wk.tiles_out_ref(want, at, np.zeros(x.shape), 4, 0, 0, th, tw)
    y_got = np.zeros(x.shape)
    per = wk.plane_block(th * tw, 6 * 4 + 4 * 4, block_floats)
    for lo, hi in ranges:
        wk.tiles_out_planes(want, at, y_got, 4, 0, 0, th, tw, per, lo, hi)
    np.testing.assert_allclose(y_got, y_want, rtol=1e-12, atol=1e-12)


def test_tile_kernels_keep_float32():
    at, _, bt = wk.winograd_matrices(4)
    x = np.random.default_rng(4).standard_normal((1, 2, 8, 8)).astype(np.float32)
    v = wk.tiles_in(x, bt, np.empty((36, 2, 4), np.float32), 4, 1, 1, 2, 2)
    ref = wk.tiles_in_ref(x, bt, np.empty((36, 2, 4), np.float32), 4, 1, 1, 2, 2)
    assert v.dtype == np.float32
    np.testing.assert_allclose(v, ref, rtol=1e-5, atol=1e-4)
    y = wk.tiles_out(v, at, np.zeros((1, 2, 8, 8), np.float32), 4, 0, 0, 2, 2)
    assert y.dtype == np.float32


# (x shape, w shape, geo (kh, kw, sh, sw, ph, pw, dh, dw), groups)
DIRECT = [((2, 3, 7, 8), (4, 3, 3, 3), (3, 3, 1, 1, 1, 1, 1, 1), 1),
          ((1, 4, 9, 7), (6, 2, 3, 2), (3, 2, 2, 3, 1, 2, 2, 1), 2),
          ((2, 4, 6, 6), (8, 1, 3, 3), (3, 3, 1, 2, 2, 0, 1, 2), 4),        # depthwise x2
          ((1, 2, 1, 9), (3, 2, 1, 4), (1, 4, 1, 2, 0, 3, 1, 1), 1),        # conv1d as 2-D
          # wide rows (stride 1, no padding): the forward pairs output channels of a group
          # when it has an even count and unrolls rows of 5 and 3 taps
          ((3, 2, 9, 11), (6, 2, 5, 5), (5, 5, 1, 1, 0, 0, 1, 1), 1),       # LeNet-like
          ((2, 4, 7, 6), (4, 2, 3, 3), (3, 3, 1, 1, 0, 0, 1, 1), 2),        # pairs per group
          ((2, 3, 6, 8), (4, 3, 2, 4), (2, 4, 1, 1, 0, 0, 1, 1), 1),        # 4 taps: not unrolled
          ((2, 3, 6, 8), (3, 3, 3, 5), (3, 5, 1, 1, 0, 0, 1, 1), 1),        # odd: one at a time
          ((2, 2, 1, 12), (2, 2, 1, 5), (1, 5, 1, 1, 0, 0, 1, 1), 1)]       # conv1d, wide


def _out_hw(x_shape, geo):
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    return ((x_shape[2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
            (x_shape[3] + 2 * pw - dw * (kw - 1) - 1) // sw + 1)


@pytest.mark.parametrize("x_shape,w_shape,geo,groups", DIRECT)
def test_direct_kernels_match_reference_and_im2col(x_shape, w_shape, geo, groups):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = (x_shape[0], w_shape[0]) + _out_hw(x_shape, geo)
    gy = rng.standard_normal(y_shape)
    # im2col + einsum as an independent definition of the forward pass
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    g3 = (1, kh, kw, 1, sh, sw, 0, ph, pw, 1, dh, dw, 1) + y_shape[2:]
    col = ik.im2col_ref(x[:, :, None], np.empty((x_shape[1] * kh * kw, x_shape[0],
                                                  y_shape[2] * y_shape[3])), g3)
    cg, og = w_shape[1], w_shape[0] // groups
    col = col.reshape(groups, cg * kh * kw, x_shape[0], -1)
    want = np.einsum("gok,gknl->ngol", w.reshape(groups, og, -1), col).reshape(y_shape)
    for use in (False, True):
        y = dk.direct_forward(x, w, np.full(y_shape, np.nan), geo, groups, use_numba=use)
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    gx = [dk.direct_grad_input(gy, w, np.full(x_shape, np.nan), geo, groups, use_numba=u)
          for u in (False, True)]
    gw = [dk.direct_grad_weight(x, gy, np.zeros(w_shape), geo, groups, use_numba=u)
          for u in (False, True)]
    np.testing.assert_allclose(gx[1], gx[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw[1], gw[0], rtol=1e-10, atol=1e-10)
    # adjoints: <y(x), gy> == <x, gx(gy)> == <w, gw(x, gy)>
    assert np.isclose(np.sum(want * gy), np.sum(x * gx[0]), rtol=1e-10)
    assert np.isclose(np.sum(want * gy), np.sum(w * gw[0]), rtol=1e-10)
