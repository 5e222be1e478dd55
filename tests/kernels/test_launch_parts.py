"""The convolution kernels that ``launch`` cuts into ranges of planes on the worker threads
(below the size that wakes Numba's pool) give the single call's result bit for bit: the
ranges write disjoint planes."""
import numpy as np
import pytest

import lezero as lz
from lezero.kernels import depthwise, im2col, numba_available, winograd
from lezero.runtime import policy

pytestmark = pytest.mark.skipif(not numba_available(), reason="the split kernels are Numba's; "
                                "without Numba their NumPy references run whole")


def _both(run):
    """``run()`` as one call and cut over two workers (tiny parts, the pool never woken)."""
    with lz.using_config("conv_threads", 1):
        one = run()
    with lz.using_config("conv_threads", 2), policy.using(gather_min_part_items=1,
                                                          serial_below=1 << 40):
        split = run()
    return one, split


def test_im2col_and_col2im_split_equal_one_call(split_parts):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    geo = (1, 3, 3, 1, 2, 1, 0, 1, 1, 1, 1, 1, 1, 4, 8)
    col = rng.standard_normal((27, 2, 32)).astype(np.float32)
    x5 = x[:, :, None]

    def run():
        out = np.empty((27, 2, 32), np.float32)
        back = np.zeros_like(x5)
        return (im2col.im2col_numba(x5, out, geo).copy(),
                im2col.col2im_numba(col, back, geo).copy())
    one, split = _both(run)
    assert split_parts == [2, 2]
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_depthwise_split_equals_one_call(split_parts):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 11, 9)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    geo = (3, 3, 1, 1, 1, 1, 1, 1)

    def run():
        y = np.empty((2, 6, 11, 9), np.float32)
        gw = np.zeros_like(w)
        return (depthwise.depthwise_forward_numba(x, w, y, geo).copy(),
                depthwise.depthwise_grad_weight_numba(x, y, gw, geo).copy())
    one, split = _both(run)
    assert split_parts and all(p == 2 for p in split_parts)
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_winograd_tiles_split_equal_one_call(split_parts):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    _, _, BT = winograd.winograd_matrices(2)
    tiles = np.empty((16, 3, 2 * 4 * 4), np.float32)

    def run():
        return winograd.tiles_in_numba(x, BT, tiles, 2, 1, 1, 4, 4).copy()
    one, split = _both(run)
    assert split_parts == [2]
    np.testing.assert_array_equal(one, split)
