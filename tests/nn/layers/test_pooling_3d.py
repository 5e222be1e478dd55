"""3-D pooling layers against torch.nn."""
import numpy as np
import pytest
import torch

from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

CASES = [
    ("MaxPool3d", (2,), {}, (2, 3, 4, 6, 6)),
    ("MaxPool3d", ((3, 2, 3),), {"stride": (2, 1, 2), "padding": (1, 0, 1),
                                 "dilation": (1, 2, 1), "ceil_mode": True}, (1, 2, 6, 7, 5)),
    ("AvgPool3d", (3,), {"stride": 2, "padding": 1}, (1, 2, 5, 7, 6)),
    ("AvgPool3d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True,
                         "count_include_pad": False}, (1, 2, 6, 5, 6)),
    ("AvgPool3d", (2,), {"ceil_mode": True, "divisor_override": 3}, (1, 2, 5, 5, 5)),
    ("AdaptiveAvgPool3d", ((3, None, 2),), {}, (1, 2, 7, 5, 6)),
    ("AdaptiveAvgPool3d", (1,), {}, (2, 3, 4, 5, 5)),
    ("AdaptiveMaxPool3d", ((2, 3, 4),), {}, (1, 2, 5, 7, 8)),
    ("MaxPool3d", (2,), {"padding": 1}, (3, 4, 5, 4)),                # unbatched
    ("AdaptiveMaxPool3d", (2,), {}, (3, 4, 5, 4)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_pooling3d_layer_matches_torch(name, args, kwargs, shape):
    ours = getattr(nn, name)(*args, **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    check_layer(ours, theirs, rand(*shape))


@pytest.mark.parametrize("name,arg", [("MaxPool3d", 2), ("AdaptiveMaxPool3d", (2, 3, 2))])
def test_max_pool3d_layers_return_torch_indices(name, arg):
    ours = getattr(nn, name)(arg, return_indices=True)
    theirs = getattr(torch.nn, name)(arg, return_indices=True)
    (_, idx), (_, tidx) = check_layer(ours, theirs, rand(2, 3, 4, 6, 5))
    np.testing.assert_array_equal(idx.data, tidx.numpy())


def test_constructor_arguments_and_errors_follow_torch():
    pool = nn.AvgPool3d(2, stride=1, padding=1, ceil_mode=True, count_include_pad=False,
                        divisor_override=2)
    assert (pool.kernel_size, pool.stride, pool.padding, pool.divisor_override) == (2, 1, 1, 2)
    assert nn.AdaptiveAvgPool3d(4).output_size == 4
    # stride=None is stored as kernel_size, as torch does, for the max and average pools
    # (torch's AvgPool1d turns both into 1-tuples; the others keep them as given)
    for name, args in (("MaxPool1d", (3,)), ("MaxPool2d", (3,)), ("MaxPool3d", (3,)),
                       ("AvgPool1d", (3,)), ("AvgPool2d", ((3, 2),)), ("AvgPool3d", (3,))):
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert ours.stride == ours.kernel_size, name
        assert np.array_equal(np.atleast_1d(ours.stride), np.atleast_1d(theirs.stride)), name
    with pytest.raises(ValueError, match="MaxPool3d.*4-D"):
        nn.MaxPool3d(2)(rand(2, 4, 4))
    with pytest.raises(ValueError, match="AvgPool3d.*padding"):
        nn.AvgPool3d(2, padding=2)(rand(1, 1, 4, 4, 4))
