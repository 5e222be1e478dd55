"""The fused bias + clamp pass (lezero.kernels.bias_act): the NumPy reference's values,
NaN kept, and the checks before the kernel's unchecked indexing."""
import numpy as np
import pytest

from lezero.kernels import bias_act, numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 7, 9), (3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bounds", [(-np.inf, np.inf), (0.0, np.inf), (0.0, 6.0)])
def test_kernel_equals_the_reference(shape, dtype, bounds):
    rng = np.random.default_rng(0)
    y = (rng.standard_normal(shape) * 5).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    want = bias_act.bias_act_ref(y.copy(), b, *bounds)
    got = y.copy()
    assert bias_act.bias_act_numba(got, b, *bounds) is got          # in place
    np.testing.assert_array_equal(got, want)                        # one add, then selects
    assert got.min() >= bounds[0] and got.max() <= bounds[1]


def test_nan_stays_and_no_bias_means_zero():
    y = np.array([[[np.nan, -2.0, 7.0]]], np.float32)
    out = bias_act.bias_act_numba(y.copy(), None, 0.0, 6.0)
    assert np.isnan(out[0, 0, 0]) and out[0, 0, 1] == 0 and out[0, 0, 2] == 6


@pytest.mark.parametrize("call, message", [
    (lambda y: bias_act.bias_act_numba(y, np.zeros(2, np.float32)), "bias"),
    (lambda y: bias_act.bias_act_numba(y[:, :, ::2], None), "contiguous"),
    (lambda y: bias_act.bias_act_numba(y.astype(np.float16), None), "float32 or float64"),
    (lambda y: bias_act.bias_act_numba(y[0, 0], None), "N, C"),
    (lambda y: bias_act.bias_act_numba(y, None, 1.0, 0.0), "lo must not exceed hi"),
])
def test_the_kernel_refuses_what_it_would_misread(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(np.ones((2, 3, 4), np.float32))


def test_dispatch_takes_the_reference_for_other_arrays():
    y = np.ones((2, 3, 4), np.float16)
    out = bias_act.bias_act_(y, np.ones(3, np.float16), 0.0, 1.5)
    assert out.dtype == np.float16 and np.all(out == 1.5)
