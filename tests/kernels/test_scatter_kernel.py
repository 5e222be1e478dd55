"""The row scatter-add kernel behind embedding and indexing gradients equals np.add.at."""
import numpy as np
import pytest

import lezero as lz
from lezero.kernels.scatter import scatter_add_
from lezero.kernels import numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint8])
def test_rows_equal_add_at_with_repeats(dtype, index_dtype):
    rng = np.random.default_rng(0)
    index = rng.integers(0, 7, 50).astype(index_dtype)          # many repeats
    values = rng.standard_normal((50, 3, 4)).astype(dtype)
    got, ref = np.zeros((7, 3, 4), dtype), np.zeros((7, 3, 4), dtype)
    scatter_add_(got, index, values)
    np.add.at(ref, index, values)
    np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_negative_indices_count_from_the_end_and_out_of_range_raises():
    t = np.zeros((4, 2))
    scatter_add_(t, np.array([-1, -4, -1]), np.ones((3, 2)))
    np.testing.assert_array_equal(t[:, 0], [1, 0, 0, 2])
    with pytest.raises(IndexError, match="out of range"):
        scatter_add_(t, np.array([4]), np.ones((1, 2)))


def test_numba_off_and_other_index_forms_take_add_at():
    t = np.zeros((3, 2))
    with lz.using_config("use_numba", False):
        scatter_add_(t, np.array([0, 0]), np.ones((2, 2)))
    scatter_add_(t, (np.array([1, 1]), np.array([0, 0])), np.ones(2))   # tuple index
    np.testing.assert_array_equal(t, [[2, 2], [2, 0], [0, 0]])
