"""The Numba integer kernels equal their NumPy references bit for bit, and the fixed-point
requantization is the exact rounding of acc * M (checked with Python fractions)."""
import math
from fractions import Fraction

import numpy as np
import pytest

from lezero.quantization import kernels as K
from lezero.quantization import reference as R
from lezero.quantization.fixed_point import mbqm, quantize_multiplier

RNG = np.random.default_rng(0)


def _rounded(x, m, shift):
    """round(x * m * 2**(shift - 31)), ties upward, in exact rational arithmetic."""
    return math.floor(Fraction(x * m, 2 ** (31 - shift)) + Fraction(1, 2))


def test_quantize_multiplier_represents_the_real_value():
    reals = np.array([1e-6, 3e-4, 0.0123, 0.5, 0.75, 0.9999999, 1.0, 1.7, 300.0])
    m, shift = quantize_multiplier(reals)
    assert np.all((m >= 1 << 30) & (m < 2 ** 31))
    back = m.astype(np.float64) * 2.0 ** (shift.astype(np.float64) - 31)
    np.testing.assert_allclose(back, reals, rtol=2 ** -30)
    assert quantize_multiplier(0.0) == (0, 0)
    with pytest.raises(ValueError, match="non-negative"):
        quantize_multiplier(-1.0)


def test_mbqm_rounds_exactly_to_nearest():
    x = np.concatenate([RNG.integers(-2 ** 31, 2 ** 31, 60), [0, 1, -1, 2 ** 31 - 1,
                                                              -2 ** 31]]).astype(np.int64)
    for real in (0.37, 1e-5, 0.5, 2.5e-3, 0.999, 1.0, 3.75):
        m, s = (int(v) for v in quantize_multiplier(real))
        got = mbqm(x, m, s)
        np.testing.assert_array_equal(got, [_rounded(int(v), m, s) for v in x])
        # the Numba scalar twin
        out = np.empty(x.shape, np.int64)
        K._rescale(x, np.int64(0), np.int64(m), np.int64(s), np.int64(0),
                   np.int64(-2 ** 62), np.int64(2 ** 62), out)
        np.testing.assert_array_equal(out, got)
    # ties go up: 3 * 0.5 = 1.5 -> 2, -3 * 0.5 = -1.5 -> -1
    m, s = quantize_multiplier(0.5)
    np.testing.assert_array_equal(mbqm(np.array([3, -3, 5]), m, s), [2, -1, 3])


@pytest.mark.parametrize("m_, k, n", [(1, 1, 1), (3, 7, 5), (17, 67, 33), (2, 130, 65)])
@pytest.mark.parametrize("zp", [0, 7, 255])
def test_gemm_requant_matches_reference(m_, k, n, zp):
    x = RNG.integers(0, 256, (m_, k)).astype(np.uint8)
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    a = x.astype(np.int16) - np.int16(zp)
    b = R.pack_weight(w, np.zeros(n, np.int32))
    bias = RNG.integers(-5000, 5000, n).astype(np.int32)
    mult, shift = quantize_multiplier(RNG.uniform(1e-4, 3e-2, n))
    for out_zp, lo, hi, dtype in ((3, 0, 255, np.uint8), (0, -128, 127, np.int8)):
        got = K.gemm_requant(a, b, bias, mult, shift, out_zp, lo, hi, dtype)
        acc = R.gemm_ref(a, b)
        want = R.requantize_ref(acc, bias, mult, shift, out_zp, lo, hi, 1, dtype)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == dtype
    np.testing.assert_array_equal(K.gemm_acc(a, b), acc)
    np.testing.assert_array_equal(acc, (x.astype(np.int64) - zp) @ w.astype(np.int64).T)


@pytest.mark.parametrize("shape, kernel, stride, pad, dil, groups", [
    ((1, 1, 5, 5), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 3, 9, 7), (3, 2), (2, 1), (1, 0), (1, 2), 1),
    ((2, 4, 6, 6), (1, 1), (2, 2), (0, 0), (1, 1), 2),
    ((1, 5, 8, 9), (5, 3), (1, 2), (2, 1), (1, 1), 1),
])
def test_conv_kernels_match_reference(shape, kernel, stride, pad, dil, groups):
    x = RNG.integers(0, 256, shape).astype(np.uint8)
    zp = 113
    geo = R.geometry(shape[2:], kernel, stride, pad, dil)
    np.testing.assert_array_equal(K.im2col(x, zp, geo), R.im2col_ref(x, zp, geo))
    o = 6
    w = RNG.integers(-128, 128, (o, shape[1]) + kernel).astype(np.int8)
    w16 = R.pack_weight(w, np.zeros(o, np.int32))
    bias = RNG.integers(-3000, 3000, o).astype(np.int32)
    mult, shift = quantize_multiplier(RNG.uniform(1e-4, 1e-2, o))
    col = R.im2col_ref(x, zp, geo)
    got = K.conv_requant(K.im2col(x, zp, geo), w16, bias, mult, shift, 9, 0, 255, np.uint8)
    want = R.requantize_ref(R.conv_acc_ref(col, w16), bias, mult, shift, 9, 0, 255, 1,
                            np.uint8)
    np.testing.assert_array_equal(got, want)
    # the reference accumulators are the convolution of (x - zp) with w
    import torch
    ref = torch.nn.functional.conv2d(torch.tensor(x.astype(np.float64) - zp),
                                     torch.tensor(w.astype(np.float64)), stride=stride,
                                     padding=pad, dilation=dil).numpy()
    np.testing.assert_array_equal(R.conv_acc_ref(col, w16).reshape(ref.shape), ref)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_pooling_kernels_match_reference(ceil_mode, dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, (2, 3, 9, 11)).astype(dtype)
    zp = 5
    for k, s, p in (((3, 3), (2, 2), (1, 1)), ((2, 2), (2, 2), (0, 0)),
                    ((3, 2), (1, 2), (1, 1))):
        geo = R.geometry((9, 11), k, s, p, (1, 1), ceil_mode)
        np.testing.assert_array_equal(K.max_pool(x, geo), R.max_pool_ref(x, geo))
        for include in (True, False):
            np.testing.assert_array_equal(K.avg_pool(x, geo, zp, include),
                                          R.avg_pool_ref(x, geo, zp, include))
    for size in ((1, 1), (4, 3), (9, 11), (2, 5)):
        np.testing.assert_array_equal(K.adaptive_avg_pool(x, size),
                                      R.adaptive_avg_pool_ref(x, size))


def test_pooling_reference_is_torch_on_the_integers():
    import torch
    x = RNG.integers(0, 256, (1, 2, 7, 8)).astype(np.uint8)
    geo = R.geometry((7, 8), (3, 3), (2, 2), (1, 1), (1, 1), True)
    t = torch.tensor(x.astype(np.float64))
    mx = torch.nn.functional.max_pool2d(t, 3, 2, 1, ceil_mode=True).numpy()
    np.testing.assert_array_equal(R.max_pool_ref(x, geo), mx)
    avg = torch.nn.functional.avg_pool2d(t, 3, 2, 1, ceil_mode=True).numpy()
    assert np.abs(R.avg_pool_ref(x, geo, 0).astype(np.float64) - avg).max() <= 0.5
    np.testing.assert_array_equal(R.avg_pool_ref(x, geo, 0), np.rint(avg))
    ada = torch.nn.functional.adaptive_avg_pool2d(t, (3, 5)).numpy()
    np.testing.assert_array_equal(R.adaptive_avg_pool_ref(x, (3, 5)), np.rint(ada))


def test_elementwise_kernels_match_reference():
    from lezero.quantization.ops import add_params
    a = RNG.integers(0, 256, (3, 5, 7)).astype(np.uint8)
    b = RNG.integers(0, 256, (3, 5, 7)).astype(np.uint8)
    p = add_params((0.02, 120), (0.05, 3), (0.06, 40))
    np.testing.assert_array_equal(K.add(a, b, p, 0, 255, np.uint8),
                                  R.add_ref(a, b, p, 0, 255, np.uint8))
    real = 0.02 * (a - 120.0) + 0.05 * (b - 3.0)
    want = np.clip(np.rint(real / 0.06) + 40, 0, 255)
    assert np.abs(R.add_ref(a, b, p, 0, 255, np.uint8) - want).max() <= 1
    m, s = quantize_multiplier(0.02 * 0.05 / 0.3)
    pm = (120, 3, int(m), int(s), 10)
    np.testing.assert_array_equal(K.mul(a, b, pm, 0, 255, np.uint8),
                                  R.mul_ref(a, b, pm, 0, 255, np.uint8))
    m, s = quantize_multiplier(0.02 / 0.011)
    np.testing.assert_array_equal(K.rescale(a, 120, m, s, 7, 0, 255, np.uint8),
                                  R.rescale_ref(a, 120, m, s, 7, 0, 255, np.uint8))
