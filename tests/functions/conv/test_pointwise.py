"""1x1 convolutions as GEMMs on the input itself: stride 1 reads ``x`` in place, stride
2 takes one strided copy; parity with PyTorch and central differences for both, with and
without padding, groups included."""
import numpy as np
import pytest
import torch.nn.functional as TF

import lezero.functions as F
from lezero.functions.conv.direct import Direct
from lezero.functions.conv.geometry import ConvProblem, conv_geometry
from lezero.testing import check_gradient, check_torch, rand


def _problem(x_shape, w_shape, stride=1, padding=0, groups=1):
    geom = conv_geometry("t", x_shape, w_shape, 2, stride, padding, 1, groups)
    return ConvProblem(geom, x_shape[0], x_shape[1], w_shape[0], "float32", "numpy")


def test_stride_one_reads_the_input_in_place():
    x = rand(2, 8, 5, 6, dtype=np.float32)
    xs = Direct()._sampled(x, _problem(x.shape, (4, 8, 1, 1)))
    assert xs.shape == (2, 1, 8, 30) and np.shares_memory(xs, x)


def test_stride_two_takes_one_strided_copy_of_the_output_grid():
    x = rand(1, 4, 7, 8, dtype=np.float32)
    xs = Direct()._sampled(x, _problem(x.shape, (4, 4, 1, 1), stride=2))
    np.testing.assert_array_equal(xs.reshape(1, 4, 4, 4), x[:, :, ::2, ::2])


@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(stride=(2, 1), groups=2),
                                dict(stride=2, padding=1)])
def test_pointwise_matches_torch_and_central_differences(kw):
    fn = lambda x, w: F.conv2d(x, w, algo="direct", **kw)          # noqa: E731
    groups = kw.get("groups", 1)
    x, w = rand(2, 4, 7, 6, seed=1), rand(6, 4 // groups, 1, 1, seed=2)
    check_torch(fn, lambda x, w: TF.conv2d(x, w, **kw), x.astype(np.float32),
                w.astype(np.float32), rtol=1e-4, atol=2e-5)
    check_gradient(fn, x[:1, :, :5], w)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1)])
@pytest.mark.parametrize("columns_below", [0, 512])
def test_batch_products_by_columns_or_per_sample(monkeypatch, kw, columns_below):
    """On maps under ``policy.pointwise_columns_below`` positions a batch's 1x1 products
    run as one product over all the batch's columns; both ways give PyTorch's numbers,
    and the way taken is the one the setting says (one 2-D product, or the stack)."""
    from lezero.functions.conv import direct
    from lezero.runtime import policy
    calls = []
    real = direct.blas_matmul
    monkeypatch.setattr(direct, "blas_matmul", lambda a, b: calls.append(b.shape) or real(a, b))
    x, w = rand(3, 5, 6, 7, seed=3), rand(4, 5, 1, 1, seed=4)
    with policy.using(pointwise_columns_below=columns_below):
        check_torch(lambda x, w: F.conv2d(x, w, algo="direct", **kw),
                    lambda x, w: TF.conv2d(x, w, **kw), x.astype(np.float32),
                    w.astype(np.float32), rtol=1e-4, atol=2e-5)
    positions = 6 * 7 if not kw else 4 * 5                  # output maps 6x7 and 4x5
    assert calls == ([] if columns_below == 0 else [(5, 3 * positions)] * len(calls))
    assert bool(calls) == bool(columns_below)


@pytest.mark.parametrize("nd, x_shape, stride, padding", [
    (2, (2, 5, 5, 5), 1, 0), (2, (3, 4, 7, 8), 2, 0), (2, (1, 3, 6, 5), (2, 3), 0),
    (1, (2, 3, 9), 2, 0), (3, (2, 2, 3, 5, 4), (1, 2, 2), 0),
    (2, (2, 3, 5, 5), 2, 1), (2, (2, 3, 4, 4), 1, (1, 0))])
def test_im2col_and_col2im_of_a_1x1_window_match_the_references(nd, x_shape, stride, padding):
    """A 1x1 window's columns are a strided, transposed copy of the input (taken with
    NumPy, not the gather kernel): im2col and its adjoint col2im give the references'
    arrays at strides 1 and 2, in 1-3 dims; a padded window (the last two) takes the
    kernels, with the same result."""
    from lezero.functions.conv import im2col as conv_im2col
    from lezero.kernels import im2col as kernels
    x = rand(*x_shape, dtype=np.float32, seed=3)
    w_shape = (4, x_shape[1]) + (1,) * nd
    geom = conv_geometry("t", x.shape, w_shape, nd, stride, padding, 1, 1)
    want = np.empty((x_shape[1], x_shape[0], geom.out_volume), np.float32)
    kernels.im2col_ref(conv_im2col.as_5d(x), want, geom.as_3d())
    col = conv_im2col.im2col(x, geom, out=np.full_like(want, np.nan))
    np.testing.assert_array_equal(col, want)
    gcol = rand(*want.shape, dtype=np.float32, seed=4)
    gx = np.zeros(x.shape, np.float32)
    kernels.col2im_ref(gcol, conv_im2col.as_5d(gx), geom.as_3d())
    got = conv_im2col.col2im(gcol, geom, x.shape, np.float32)
    assert got.flags.c_contiguous and got.dtype == np.float32
    np.testing.assert_array_equal(got, gx)


def test_the_1x1_copy_is_taken_where_it_may_be(monkeypatch):
    """The gather kernel runs for a padded 1x1 window and for a strided ``out`` (unfold's
    view), not for a plain one."""
    from lezero.functions.conv import im2col as conv_im2col
    calls = []
    real = conv_im2col.im2col_kernels.im2col
    monkeypatch.setattr(conv_im2col.im2col_kernels, "im2col",
                        lambda *a: calls.append(1) or real(*a))
    x = rand(2, 3, 4, 4, dtype=np.float32)
    for padding, strided, kernel in ((0, False, 0), (1, False, 1), (0, True, 1)):
        geom = conv_geometry("t", x.shape, (4, 3, 1, 1), 2, 1, padding, 1, 1)
        out = np.empty((x.shape[0], 3, geom.out_volume), np.float32).transpose(1, 0, 2) \
            if strided else None
        calls.clear()
        conv_im2col.im2col(x, geom, out=out)
        assert len(calls) == kernel, (padding, strided)
