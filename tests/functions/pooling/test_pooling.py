"""Pooling and resizing: central differences, double backward, PyTorch parity, bad inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_double_backward, check_gradient, check_torch, rand


def check(fn, torch_fn, *arrays, double=True):
    """The three checks.  Double backward runs on ``fn(x) ** 2`` so the gradient depends on
    x and the backward of the backward (scatter <-> gather, pool <-> its transpose) runs."""
    check_gradient(fn, *arrays)
    if double:
        check_double_backward(lambda *xs: fn(*xs) * fn(*xs), *arrays)
    check_torch(fn, torch_fn, *[np.asarray(a, np.float32) for a in arrays])


MAX_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1)),
]


@pytest.mark.parametrize("kw", MAX_CASES, ids=str)
def test_max_pool2d(kw):
    x = rand(1, 2, 6, 5, seed=1)
    check(lambda a: F.max_pool2d(a, **kw), lambda a: TF.max_pool2d(a, **kw), x)


@pytest.mark.parametrize("use_numba", [True, False])
def test_max_pool2d_indices_and_ties_match_torch(use_numba):
    x = np.round(rand(2, 3, 7, 7, seed=2, dtype=np.float32) * 2) / 2   # many ties
    with lz.using_config("use_numba", use_numba):
        y, idx = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
        ty, tidx = TF.max_pool2d(torch.tensor(x), 3, stride=2, padding=1, return_indices=True)
        np.testing.assert_array_equal(y.data, ty.numpy())
        np.testing.assert_array_equal(idx.data, tidx.numpy())
        assert idx.dtype == np.int64 and not idx.requires_grad
        # the gradient of tied windows goes to the first maximum, as in torch
        check_torch(lambda a: F.max_pool2d(a, 2, stride=1), lambda a: TF.max_pool2d(a, 2, 1), x)


def test_max_pool2d_unbatched_and_1d():
    x = rand(2, 5, 6, seed=3)
    check(lambda a: F.max_pool2d(a, 2), lambda a: TF.max_pool2d(a, 2), x)
    x1 = rand(2, 3, 9, seed=4)
    kw = dict(kernel_size=3, stride=2, padding=1, dilation=1)
    check(lambda a: F.max_pool1d(a, **kw), lambda a: TF.max_pool1d(a, **kw), x1)
    y, i = F.max_pool1d(x1.astype(np.float32), 2, return_indices=True)
    np.testing.assert_array_equal(i.data, TF.max_pool1d(torch.tensor(x1, dtype=torch.float32),
                                                        2, return_indices=True)[1].numpy())


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(2, 1), ceil_mode=True),
    dict(kernel_size=2, divisor_override=3),
], ids=str)
def test_avg_pool2d(kw):
    check(lambda a: F.avg_pool2d(a, **kw), lambda a: TF.avg_pool2d(a, **kw), rand(1, 2, 5, 6,
                                                                                   seed=5))


def test_avg_pool1d():
    kw = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    check(lambda a: F.avg_pool1d(a, **kw), lambda a: TF.avg_pool1d(a, **kw), rand(2, 2, 8,
                                                                                  seed=6))


@pytest.mark.parametrize("p", [2.0, 3])
def test_lp_pool(p):
    x = rand(1, 2, 5, 5, low=0.2, high=1.5, seed=7)
    check(lambda a: F.lp_pool2d(a, p, 2, stride=1), lambda a: TF.lp_pool2d(a, p, 2, stride=1), x)
    x1 = rand(2, 2, 7, low=0.2, high=1.5, seed=8)
    check(lambda a: F.lp_pool1d(a, p, 3, stride=2, ceil_mode=True),
          lambda a: TF.lp_pool1d(a, p, 3, stride=2, ceil_mode=True), x1)


@pytest.mark.parametrize("out", [(3, 2), 1, (4, None), (5, 6)], ids=str)
def test_adaptive_pools(out):
    x = rand(1, 2, 5, 6, seed=9)
    check(lambda a: F.adaptive_avg_pool2d(a, out), lambda a: TF.adaptive_avg_pool2d(a, out), x)
    check(lambda a: F.adaptive_max_pool2d(a, out), lambda a: TF.adaptive_max_pool2d(a, out), x)
    x32 = np.round(x.astype(np.float32) * 2) / 2              # ties: same index as torch
    _, idx = F.adaptive_max_pool2d(x32, out, return_indices=True)
    _, tidx = TF.adaptive_max_pool2d(torch.tensor(x32), out, return_indices=True)
    np.testing.assert_array_equal(idx.data, tidx.numpy())


def test_adaptive_pools_1d_and_unbatched():
    x = rand(2, 3, 7, seed=10)
    check(lambda a: F.adaptive_avg_pool1d(a, 3), lambda a: TF.adaptive_avg_pool1d(a, 3), x)
    check(lambda a: F.adaptive_max_pool1d(a, 4), lambda a: TF.adaptive_max_pool1d(a, 4), x)
    check(lambda a: F.adaptive_avg_pool2d(a, 2), lambda a: TF.adaptive_avg_pool2d(a, 2),
          rand(2, 4, 5, seed=11))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=2, stride=2, padding=1)],
                         ids=str)
def test_max_unpool2d(kw):
    # disjoint windows: no repeated index (where torch and LeZero both keep one value)
    x = rand(1, 2, 6, 6, seed=12, dtype=np.float32)
    y, idx = F.max_pool2d(x, return_indices=True, **kw)
    size = (6, 6)
    check(lambda a: F.max_unpool2d(a, idx, output_size=size, **kw),
          lambda a: TF.max_unpool2d(a, torch.tensor(idx.data), output_size=size, **kw), y.data)


def test_max_unpool1d():
    x = rand(2, 2, 8, seed=13, dtype=np.float32)
    y, idx = F.max_pool1d(x, 2, return_indices=True)
    check(lambda a: F.max_unpool1d(a, idx, 2), lambda a: TF.max_unpool1d(a, torch.tensor(idx.data),
                                                                           2), y.data)


@pytest.mark.parametrize("kw", [
    dict(size=(5, 9), mode="nearest"),
    dict(scale_factor=2.5, mode="nearest"),
    dict(scale_factor=(0.6, 1.5), mode="nearest-exact"),
    dict(size=(5, 9), mode="bilinear"),
    dict(size=(7, 2), mode="bilinear", align_corners=True),
    dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
    dict(size=(3, 2), mode="area"),
], ids=str)
def test_interpolate_4d(kw):
    check(lambda a: F.interpolate(a, **kw), lambda a: TF.interpolate(a, **kw),
          rand(1, 2, 4, 5, seed=14))


def test_interpolate_3d_and_5d():
    check(lambda a: F.interpolate(a, size=7, mode="linear"),
          lambda a: TF.interpolate(a, size=7, mode="linear"), rand(1, 2, 4, seed=15))
    check(lambda a: F.interpolate(a, scale_factor=2, mode="trilinear", align_corners=True),
          lambda a: TF.interpolate(a, scale_factor=2, mode="trilinear", align_corners=True),
          rand(1, 1, 2, 2, 3, seed=16))


def test_pixel_shuffle_roundtrip():
    x = rand(1, 8, 2, 3, seed=17)
    check(lambda a: F.pixel_shuffle(a, 2), lambda a: TF.pixel_shuffle(a, 2), x)
    check(lambda a: F.pixel_unshuffle(a, 2), lambda a: TF.pixel_unshuffle(a, 2),
          rand(2, 4, 6, seed=18))
    z = F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2)
    np.testing.assert_array_equal(z.data, x)


def test_float32_in_float32_out():
    x = lz.Variable(rand(1, 2, 4, 4, dtype=np.float32))
    outs = [F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.lp_pool2d(x, 2, 2),
            F.adaptive_avg_pool2d(x, 3), F.adaptive_max_pool2d(x, 3),
            F.interpolate(x, scale_factor=2, mode="bilinear"), F.pixel_shuffle(x, 1)]
    assert all(y.dtype == np.float32 for y in outs)
    sum(y.sum() for y in outs).backward()
    assert x.grad.dtype == np.float32


def test_constant_input_gets_no_gradient():
    w = lz.Variable(rand(1, 2, 4, 4, dtype=np.float32))
    y = F.max_pool2d(rand(1, 2, 4, 4, dtype=np.float32), 2) * w[:, :, :2, :2]
    assert y.requires_grad
    y.sum().backward()
    assert w.grad is not None


def test_bad_inputs_name_the_operator_and_argument():
    x = lz.Variable(np.ones((1, 2, 4, 4), np.float32))
    with pytest.raises(ValueError, match="max_pool2d.*4-D"):
        F.max_pool2d(lz.Variable(np.ones((4, 4), np.float32)), 2)
    with pytest.raises(TypeError, match="max_pool2d.*floating"):
        F.max_pool2d(np.ones((1, 1, 4, 4), np.int64), 2)
    with pytest.raises(ValueError, match="max_pool2d.*padding"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="max_pool2d.*too small"):
        F.max_pool2d(x, 5)
    with pytest.raises(TypeError, match="max_pool2d: kernel_size"):
        F.max_pool2d(x, 2.5)
    with pytest.raises(ValueError, match="avg_pool2d: stride must be >= 1"):
        F.avg_pool2d(x, 2, stride=0)
    with pytest.raises(ValueError, match="avg_pool2d: divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(ValueError, match="lp_pool2d: norm_type"):
        F.lp_pool2d(x, 0, 2)
    with pytest.raises(ValueError, match="adaptive_avg_pool2d: output_size"):
        F.adaptive_avg_pool2d(x, (0, 2))
    with pytest.raises(TypeError, match="adaptive_max_pool2d: output_size"):
        F.adaptive_max_pool2d(x, (1, 2, 3))
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    with pytest.raises(ValueError, match="max_unpool2d: output_size"):
        F.max_unpool2d(y, idx, 2, output_size=(9, 9))
    with pytest.raises(ValueError, match="max_unpool2d: indices must lie"):
        F.max_unpool2d(y, idx.data + 100, 2)
    with pytest.raises(TypeError, match="max_unpool2d: indices must be integers"):
        F.max_unpool2d(y, y, 2)
    with pytest.raises(ValueError, match="interpolate: give exactly one"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="interpolate: mode 'bilinear' needs a 4-D"):
        F.interpolate(lz.Variable(np.ones((1, 2, 4), np.float32)), size=3, mode="bilinear")
    with pytest.raises(ValueError, match="interpolate: align_corners"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(ValueError, match="interpolate: mode must be"):
        F.interpolate(x, size=3, mode="bicubic")
    with pytest.raises(TypeError, match="interpolate: mode must be a str"):
        F.interpolate(x, size=3, mode=None)
    with pytest.raises(TypeError, match="interpolate: align_corners must be None or a bool"):
        F.interpolate(x, size=3, mode="bilinear", align_corners="yes")
    with pytest.raises(TypeError, match="max_pool2d: x must be a Variable"):
        F.max_pool2d(x.data.tolist(), 2)
    with pytest.raises(TypeError, match="pixel_unshuffle: x must be floating"):
        F.pixel_unshuffle(np.ones((1, 1, 4, 4), np.int64), 2)
    with pytest.raises(ValueError, match="interpolate: scale_factor must be positive"):
        F.interpolate(x, scale_factor=-2.0)
    with pytest.raises(ValueError, match="interpolate: size must give one value per spatial dim"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(TypeError, match="pixel_shuffle: upscale_factor must be an int"):
        F.pixel_shuffle(x, 2.0)
    with pytest.raises(TypeError, match="lp_pool2d: norm_type must be a number"):
        F.lp_pool2d(x, "2", 2)
    with pytest.raises(ValueError, match="pixel_shuffle.*divisible"):
        F.pixel_shuffle(x, 2)
    with pytest.raises(ValueError, match="pixel_unshuffle.*divisible"):
        F.pixel_unshuffle(x, 3)


def test_pooling_on_each_backend_matches_torch(xp):
    x = rand(2, 3, 7, 6, dtype=np.float32, seed=19)
    for fn, tfn in [
            (lambda a: F.max_pool2d(a, 3, 2, 1), lambda a: TF.max_pool2d(a, 3, 2, 1)),
            (lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True),
             lambda a: TF.avg_pool2d(a, 3, 2, 1, ceil_mode=True)),
            (lambda a: F.adaptive_max_pool2d(a, (3, 4)),
             lambda a: TF.adaptive_max_pool2d(a, (3, 4))),
            (lambda a: F.interpolate(a, scale_factor=2, mode="bilinear"),
             lambda a: TF.interpolate(a, scale_factor=2, mode="bilinear"))]:
        check_torch(fn, tfn, x, xp=xp)
