"""``kernels.bias``: the dispatchers take the kernel only for arrays it fits and give
NumPy's result either way."""
import numpy as np
import pytest

from lezero.kernels import bias, numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="needs Numba")


def test_mixed_dtypes_take_the_reference():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal(4)                            # float64 bias, float32 output
    assert not bias.fits(y, b)
    expected = (y + b).astype(np.float32)      # computed in float64, as NumPy does
    bias.add_bias_(y, b)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    assert y.dtype == np.float32


def test_a_transposed_gradient_is_summed_by_numpy():
    g = np.random.default_rng(1).standard_normal((6, 9)).astype(np.float32).T   # (9, 6)
    assert not bias.fits(g)
    np.testing.assert_array_equal(bias.bias_grad(g), g.sum(axis=0))


def test_kernel_sums_in_order_like_numpy_even_where_rounding_shows():
    """Values whose float32 sum depends on the order: the kernel's matches NumPy's."""
    g = np.array([[1e8, 1.0], [1.0, 1e8], [-1e8, 1.0], [1.0, -1e8]] * 50, np.float32)
    np.testing.assert_array_equal(bias.bias_grad_numba(g), g.sum(axis=0))


def test_one_column_goes_to_numpy_which_sums_it_pairwise():
    g = np.array([[1e8], [1.0], [-1e8], [1.0]] * 50, np.float32)
    np.testing.assert_array_equal(bias.bias_grad(g), g.sum(axis=0))
    assert bias.bias_grad_numba(g)[0] != g.sum(axis=0)[0]     # why: the orders differ


@pytest.mark.parametrize("y_shape, b_shape", [((4, 3), (2,)), ((4, 3), (4,)), ((3,), (3,)),
                                              ((4, 3), (1, 3))])
def test_a_bias_that_does_not_fit_the_rows_is_refused(y_shape, b_shape):
    y, b = np.zeros(y_shape, np.float32), np.ones(b_shape, np.float32)
    with pytest.raises(ValueError, match=r"add_bias_: .*got y \S+.* and b "):
        bias.add_bias_(y, b)
