"""Pooling, resizing and patch layers against torch.nn."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

CASES = [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, (2, 3, 9)),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", ((3, 2),), {"stride": (2, 1), "dilation": (1, 2), "ceil_mode": True},
     (1, 2, 7, 8)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 8)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1}, (1, 2, 7, 7)),
    ("AvgPool2d", (2,), {"ceil_mode": True, "divisor_override": 3}, (1, 2, 5, 5)),
    ("LPPool1d", (2, 3), {"stride": 2}, (2, 3, 9)),
    ("LPPool2d", (3.0, 2), {}, (1, 2, 6, 6)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((3, None),), {}, (1, 2, 7, 5)),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 5, 5)),
    ("AdaptiveMaxPool1d", (3,), {}, (2, 3, 7)),
    ("AdaptiveMaxPool2d", ((2, 3),), {}, (1, 2, 7, 8)),
    ("Upsample", (), {"scale_factor": 2}, (1, 2, 3, 4)),
    ("Upsample", (), {"size": (5, 7), "mode": "bilinear"}, (1, 2, 3, 4)),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True},
     (1, 2, 4, 4)),
    ("Upsample", (), {"scale_factor": 3, "mode": "linear"}, (2, 2, 5)),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, (1, 2, 3, 3)),
    ("UpsamplingBilinear2d", (), {"size": 5}, (1, 2, 3, 3)),
    ("PixelShuffle", (2,), {}, (1, 8, 3, 2)),
    ("PixelUnshuffle", (2,), {}, (1, 2, 4, 6)),
    ("Unfold", ((2, 3),), {"padding": 1, "stride": 2}, (2, 3, 5, 6)),
    ("Fold", ((4, 5), 2), {"stride": 1}, (2, 12, 12)),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,args,kwargs,shape", CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_pooling_layer_matches_torch(name, args, kwargs, shape):
    ours = getattr(nn, name)(*args, **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    check_layer(ours, theirs, rand(*shape, low=0.1, high=2.0))    # LP pooling wants x > 0


@pytest.mark.parametrize("n", [1, 2])
def test_max_pool_indices_feed_max_unpool(n):
    pool = getattr(nn, f"MaxPool{n}d")(2, return_indices=True)
    t_pool = getattr(torch.nn, f"MaxPool{n}d")(2, return_indices=True)
    shape = (2, 3, 8) if n == 1 else (2, 3, 6, 6)
    (y, idx), (ty, tidx) = check_layer(pool, t_pool, rand(*shape))
    np.testing.assert_array_equal(idx.data, tidx.numpy())
    unpool, t_unpool = getattr(nn, f"MaxUnpool{n}d")(2), getattr(torch.nn, f"MaxUnpool{n}d")(2)
    pooled = rand(*y.shape, seed=1)
    check_layer(unpool, t_unpool, pooled, idx.data)
    size = (9,) if n == 1 else (7, 7)       # output_size resolves the ambiguity
    check_layer(unpool, t_unpool, pooled, idx.data, kwargs={"output_size": size})


def test_repr_and_stored_arguments():
    pool = nn.MaxPool2d(3, stride=2)
    assert pool.kernel_size == 3 and pool.stride == 2 and not pool.ceil_mode
    assert "kernel_size=3" in repr(pool)
    assert nn.Upsample(scale_factor=2).mode == "nearest"


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.MaxPool2d(), TypeError, "MaxPool2d: missing a required argument"),
    (lambda: nn.MaxPool2d(2, ceil_mode="yes"), TypeError, "MaxPool2d: ceil_mode must be a"),
    (lambda: nn.AvgPool2d(2, divisor_override=1.5), TypeError, "AvgPool2d: divisor_override"),
    (lambda: nn.LPPool2d("two", 2), TypeError, "LPPool2d: norm_type must be a number"),
    (lambda: nn.PixelShuffle(2.0), TypeError, "PixelShuffle: upscale_factor must be an int"),
    (lambda: nn.Fold(4), TypeError, "Fold: missing a required argument: 'kernel_size'"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    x = lz.Variable(rand(1, 3, 4, 4))
    with pytest.raises(ValueError, match="MaxPool2d: max_pool2d: padding"):
        nn.MaxPool2d(2, padding=2)(x)
    with pytest.raises(ValueError, match="PixelShuffle: pixel_shuffle"):
        nn.PixelShuffle(2)(x)
    with pytest.raises(ValueError, match="AvgPool1d: avg_pool1d"):
        nn.AvgPool1d(2)(x)
    with pytest.raises(TypeError, match="MaxPool2d: forward takes 1 input"):
        nn.MaxPool2d(2)(x, x)
