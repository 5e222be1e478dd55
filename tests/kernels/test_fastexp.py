"""exp32, the inlinable float32 exponential, against NumPy's exp."""
import numpy as np
import pytest

from lezero.kernels import numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


def _vector_exp():
    import numba

    from lezero.kernels import fastexp, load

    FAST, exp32 = load(fastexp).FAST, load(fastexp).exp32

    @numba.njit(fastmath=FAST, error_model="numpy")
    def vexp(x, out):
        for i in range(x.size):
            out[i] = exp32(x[i])
    return vexp


def _exp32(x):
    out = np.empty_like(x)
    _vector_exp()(x, out)
    return out


def test_exp32_within_two_ulp_over_the_whole_range():
    x = np.linspace(-87, 88.7, 400_001, dtype=np.float32)
    got = _exp32(x).astype(np.float64)
    truth = np.exp(x.astype(np.float64))
    ulp = np.spacing(truth.astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - truth) / ulp) <= 2.0


def test_exp32_special_values_and_subnormals():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 89.0, 1e30, -104.5, -1e30, -100.0,
                  -88.0, 88.72], np.float32)
    got = _exp32(x)
    assert np.isnan(got[0])
    assert got[1] == np.inf and got[2] == 0.0
    assert got[3] == got[4] == 1.0
    assert got[5] == np.inf and got[6] == np.inf          # overflow, as numpy.exp
    assert got[7] == 0.0 and got[8] == 0.0                # below the subnormals
    with np.errstate(under="ignore"):
        ref = np.exp(x[9:])
    # e^-100 is a float32 subnormal (3.7e-44): kept, to within a subnormal step.
    np.testing.assert_allclose(got[9], ref[0], rtol=0, atol=2e-45)
    np.testing.assert_allclose(got[10:], ref[1:], rtol=3e-7)
    assert np.isfinite(got[11])


def test_bits_to_float32_reinterprets_int_bits():
    import numba

    from lezero.kernels import fastexp, load

    bits_to_float32 = load(fastexp).bits_to_float32

    @numba.njit
    def f(i):
        return bits_to_float32(i)
    for v in (1.0, -2.5, 3.4e38, 1e-45):
        bits = int(np.array(v, np.float32).view(np.int32))
        assert f(np.int32(bits)) == np.float32(v)
        assert f(bits) == np.float32(v)      # int64 arguments use their low 32 bits


def test_float32_to_bits_is_the_inverse_bitcast():
    import numba

    from lezero.kernels import fastexp, load

    fast = load(fastexp)
    bits_to_float32, float32_to_bits = fast.bits_to_float32, fast.float32_to_bits

    @numba.njit
    def roundtrip(x):
        return float32_to_bits(x), bits_to_float32(float32_to_bits(x))
    for v in (1.0, -2.5, -0.0, 3.4e38, 1e-45, np.inf):
        bits, back = roundtrip(np.float32(v))
        assert bits == int(np.array(v, np.float32).view(np.int32))
        assert back == np.float32(v) and np.signbit(back) == np.signbit(np.float32(v))


def _row_max():
    import numba

    from lezero.kernels import fastexp, load

    max32 = load(fastexp).max32

    @numba.njit
    def rows(a, n, scale, out):
        for r in range(a.shape[0]):
            out[r] = max32(a[r], n, scale)
    return rows


def test_max32_equals_numpy_max_of_the_scaled_prefix():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((200, 37)) * 10.0 ** rng.integers(-30, 30, (200, 37))
         ).astype(np.float32)
    out = np.empty(200, np.float32)
    for n, scale in ((37, 1.0), (37, 0.125), (5, -3.0), (1, 2.0)):
        _row_max()(a, n, np.float32(scale), out)
        np.testing.assert_array_equal(out, (a[:, :n] * np.float32(scale)).max(axis=1))


def test_max32_special_values():
    rows = np.zeros((6, 4), np.float32)
    rows[0, 2] = np.nan
    rows[1, 1] = -np.nan                # sign bit set: still NaN, not the smallest value
    rows[2] = -np.inf
    rows[3] = [-0.0, -0.0, -0.0, -0.0]
    rows[4] = [-5.0, np.inf, 1.0, 2.0]
    rows[5] = [-7.0, -3.0, -1e-45, -9.0]
    out = np.empty(6, np.float32)
    _row_max()(rows, 4, np.float32(1.0), out)
    assert np.isnan(out[0]) and np.isnan(out[1])
    assert out[2] == -np.inf
    assert out[3] == 0 and np.signbit(out[3])
    assert out[4] == np.inf and out[5] == np.float32(-1e-45)
    _row_max()(rows, 0, np.float32(1.0), out)
    assert np.all(out == -np.inf)       # an empty prefix
