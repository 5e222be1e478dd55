"""exp32, the inlinable float32 exponential, against NumPy's exp."""
import numpy as np
import pytest

from lezero.kernels import numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


def _vector_exp():
    import numba

    from lezero.kernels.fastexp import FAST, exp32

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

    from lezero.kernels.fastexp import bits_to_float32

    @numba.njit
    def f(i):
        return bits_to_float32(i)
    for v in (1.0, -2.5, 3.4e38, 1e-45):
        bits = int(np.array(v, np.float32).view(np.int32))
        assert f(np.int32(bits)) == np.float32(v)
        assert f(bits) == np.float32(v)      # int64 arguments use their low 32 bits
