"""The Numba pooling kernels equal their NumPy references, bit for bit."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.functions.pooling.common import pooled_size
from lezero.kernels import numba_available
from lezero.kernels import pooling as K

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

GEOMETRIES = [
    # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False),      # the unrolled 2x2 kernel
    ((2, 2), (2, 2), (0, 0), (1, 1), True),       # ceil_mode overhangs: the general one
    ((2, 2), (2, 2), (0, 0), (2, 2), False),      # dilated: the general one too
    ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((3, 2), (1, 2), (1, 1), (2, 1), False),
    ((1, 4), (3, 1), (0, 2), (1, 2), True),
]


def _case(geom, dtype, seed):
    kernel, stride, padding, dilation, ceil = geom
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal((5, 9, 8)) * 2).astype(dtype)   # plenty of ties
    x[0, :3, :3] = -np.inf                                           # an all -inf window
    x[1, 4, 4] = np.nan                                              # NaN wins
    x[1, 4, 6] = np.nan
    # NaNs after a window's first tap (where the fast kernels' ">" alone is wrong and
    # the exact ones rerun): one; two in a window (the later wins); one before a larger
    # number (the NaN stays)
    x[2, 1, 1] = np.nan
    x[2, 2, 3] = x[2, 3, 2] = np.nan
    x[3, 0, 1], x[3, 1, 0] = np.nan, 100.0
    out = tuple(pooled_size(n, k, s, p, d, ceil) for n, k, s, p, d in
                zip(x.shape[1:], kernel, stride, padding, dilation))
    return x, (kernel, stride, padding, dilation, out)


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_kernel_equals_reference(geom, dtype):
    x, args = _case(geom, dtype, seed=0)
    y_ref, i_ref = K.max_pool_ref(x, *args)
    y_nb, i_nb = K.max_pool2d_numba(x, *args)
    assert y_nb.dtype == y_ref.dtype == dtype
    np.testing.assert_array_equal(y_nb, y_ref)
    np.testing.assert_array_equal(i_nb, i_ref)
    assert i_ref.min() >= 0 and i_ref.max() < x.shape[1] * x.shape[2]


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
def test_max_pool2d_kernel_equals_reference_without_nan(geom):
    # with a NaN in a part the exact kernel reruns it, which would hide a wrong fast path
    x, args = _case(geom, np.float32, seed=4)
    x = np.nan_to_num(x, nan=0.5)
    for got, want in zip(K.max_pool2d_numba(x, *args), K.max_pool_ref(x, *args)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("nan", [True, False])
def test_max_values_kernel_equals_reference(geom, nan):
    """The kernel without positions (inference) gives the reference's values, NaN rule
    included (a part holding a NaN reruns with the positions kernel)."""
    x, args = _case(geom, np.float32, seed=2)
    if not nan:
        x = np.nan_to_num(x, nan=0.25)
    np.testing.assert_array_equal(K.max_values2d_numba(x, *args), K.max_pool_ref(x, *args)[0])


@pytest.mark.parametrize("geom", [
    ((3, 3), (2, 2), (1, 1), (1, 1), False),      # ResNet's pooling: columns spelled out
    ((3, 3), (2, 2), (0, 0), (1, 1), True),
    ((2, 2), (2, 2), (0, 0), (1, 1), True),       # 2 wide at stride 2: spelled out too
    ((5, 3), (1, 2), (2, 1), (1, 1), False),      # five rows: the passes past three
    ((3, 3), (2, 3), (1, 1), (2, 1), False),      # the general column loop
], ids=str)
def test_max_values_kernel_on_wide_planes(geom):
    """Planes wide enough for the vectorised column loops (their bodies, not only the
    remainders), with NaNs inside them: the values equal the reference's."""
    kernel, stride, padding, dilation, ceil = geom
    rng = np.random.default_rng(7)
    x = np.round(rng.standard_normal((3, 23, 101)) * 3).astype(np.float32)
    x[0, 5, 40] = x[1, 0, 0] = x[2, 22, 100] = x[2, 9, 63] = np.nan
    x[1, 7, 50:53] = -np.inf
    out = tuple(pooled_size(n, k, s, p, d, ceil) for n, k, s, p, d in
                zip(x.shape[1:], kernel, stride, padding, dilation))
    args = (kernel, stride, padding, dilation, out)
    np.testing.assert_array_equal(K.max_values2d_numba(x, *args), K.max_pool_ref(x, *args)[0])


@pytest.mark.parametrize("geom", [
    ((3, 3), (2, 2), (1, 1), (1, 1), False),      # the columns spelled out
    ((3, 3), (2, 2), (0, 0), (1, 1), True),
    ((5, 3), (1, 2), (2, 1), (1, 1), False),
    ((3, 3), (2, 3), (1, 1), (2, 1), False),      # the general column loop
], ids=str)
@pytest.mark.parametrize("nan", [True, False])
def test_max_pool2d_kernel_on_wide_planes(geom, nan):
    """The positions too, on planes wide enough for the vectorised loops' bodies, with
    many ties (small integers) and, in one case, NaNs (the exact kernel reruns)."""
    kernel, stride, padding, dilation, ceil = geom
    rng = np.random.default_rng(8)
    x = rng.integers(-2, 3, (3, 23, 101)).astype(np.float32)
    if nan:
        x[0, 5, 40] = x[2, 9, 63] = np.nan
    out = tuple(pooled_size(n, k, s, p, d, ceil) for n, k, s, p, d in
                zip(x.shape[1:], kernel, stride, padding, dilation))
    args = (kernel, stride, padding, dilation, out)
    for got, want in zip(K.max_pool2d_numba(x, *args), K.max_pool_ref(x, *args)):
        np.testing.assert_array_equal(got, want)


def test_kernels_with_an_empty_output():
    """No output column (or row): empty results, and no window's taps read."""
    x = np.ones((2, 5, 4), np.float32)
    for out in ((3, 0), (0, 2)):
        args = ((3, 3), (1, 1), (0, 0), (1, 1), out)
        assert K.max_values2d_numba(x, *args).shape == (2,) + out
        y, i = K.max_pool2d_numba(x, *args)
        assert y.shape == i.shape == (2,) + out


def test_max_pool2d_kernel_refuses_planes_of_2_31_rows():
    """The kernel holds row numbers in 32 bits: its wrapper refuses taller planes (a
    broadcast view, no memory) and the dispatcher sends them to the reference."""
    x = np.broadcast_to(np.float32(1), (1, 2 ** 31, 1))
    with pytest.raises(ValueError, match=r"max_pool2d_numba: planes of 2147483648 rows"):
        K.max_pool2d_numba(x, (1, 1), (2 ** 30, 1), (0, 0), (1, 1), (2, 1))


def test_operator_without_gradient_skips_the_positions():
    x = np.random.default_rng(5).standard_normal((2, 3, 9, 9)).astype(np.float32)
    x[0, 1, 4, 4] = np.nan
    v = lz.Variable(x)
    want = F.max_pool2d(v, 3, stride=2, padding=1)
    with lz.no_grad():
        y = F.max_pool2d(v, 3, stride=2, padding=1)
        y2, i = F.max_pool2d(v, 3, stride=2, padding=1, return_indices=True)
    np.testing.assert_array_equal(y.data, want.data)
    np.testing.assert_array_equal(y2.data, want.data)
    assert i.shape == y.shape and y.creator is None


def test_max_pool2d_reference_matches_torch_on_nan_and_inf():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    x, (k, s, p, d, out) = _case(GEOMETRIES[1], np.float32, seed=1)
    y, i = K.max_pool_ref(x, k, s, p, d, out)
    ty, ti = TF.max_pool2d(torch.tensor(x)[None], k, s, p, d, ceil_mode=True,
                           return_indices=True)
    np.testing.assert_array_equal(y, ty[0].numpy())
    np.testing.assert_array_equal(i, ti[0].numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,width,row_size", [(6, 10, 7), (900, 49, 196)])  # 2nd: split
def test_scatter_add_rows_kernel_equals_reference(dtype, rows, width, row_size):
    rng = np.random.default_rng(2)
    g = rng.standard_normal((rows, width)).astype(dtype)
    idx = rng.integers(0, row_size, size=(rows, width))    # repeated indices add up
    with lz.using_config("use_numba", False):
        ref = K.scatter_add_rows(g, idx, row_size)        # numpy.add.at
    nb = K.scatter_add_rows(g, idx, row_size)             # the scatter-add kernel
    assert nb.dtype == dtype
    np.testing.assert_allclose(nb, ref, rtol=1e-6)
    np.testing.assert_allclose(ref.sum(axis=1), g.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_operator_gives_the_same_with_numba_off():
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 7)).astype(np.float32)
    results = []
    for flag in (True, False):
        with lz.using_config("use_numba", flag):
            v = lz.Variable(x)
            y, i = F.max_pool2d(v, 3, stride=2, padding=1, return_indices=True)
            (y * y).sum().backward()
            results.append((y.data, i.data, v.grad.data))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("geo", [((2, 2), (2, 2), (0, 0), (1, 1), (7, 6)),    # unrolled 2x2
                                 ((3, 3), (2, 2), (1, 1), (1, 1), (7, 6))])   # general loop
def test_rows_split_over_threads_give_the_same_as_one_part(split_parts, geo):
    """Large inputs run one range of rows per thread; the parts must tile the rows."""
    from lezero import runtime
    if runtime.threads() < 2:
        pytest.skip("one thread: nothing is split")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((301, 15, 13)).astype(np.float32)
    y_one, i_one = K.max_pool2d_numba(x, *geo)
    g = rng.standard_normal(y_one.shape).astype(np.float32)
    s_one = K.scatter_add_rows(g, i_one, 15 * 13)
    split_parts.clear()
    with runtime.policy.using(pool_min_part_items=1024):
        y, i = K.max_pool2d_numba(x, *geo)
        s = K.scatter_add_rows(g, i, 15 * 13)
    assert split_parts == [runtime.threads()] * 2
    np.testing.assert_array_equal(y, y_one)
    np.testing.assert_array_equal(i, i_one)
    np.testing.assert_array_equal(s, s_one)
