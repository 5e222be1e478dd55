"""ConvTranspose3d and InstanceNorm3d against torch.nn with the same state_dict: forward,
input and parameter gradients, running statistics in train and eval, PyTorch's positional
argument order for the transposed convolutions, bad arguments and inputs."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_buffers, check_layer, rand
from tests.nn.layers.test_normalization import _randomise

CONV_T3D = [
    ((2, 3, 3), {}, (2, 2, 3, 4, 3)),
    ((4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
     (1, 4, 3, 2, 3)),
    ((3, 2, (2, 3, 2)), {"stride": (1, 2, 2), "dilation": (2, 1, 2), "bias": False},
     (2, 3, 3, 3, 2)),
    ((4, 4, 3), {"stride": 3, "output_padding": (2, 0, 1), "dilation": 1, "groups": 4,
                 "padding": (0, 1, 2)}, (1, 4, 2, 3, 3)),
]


@pytest.mark.parametrize("args,kwargs,shape", CONV_T3D,
                         ids=["plain", "stride_outpad_groups", "dilation_nobias", "depthwise"])
def test_conv_transpose3d_matches_torch(args, kwargs, shape):
    ours, theirs = nn.ConvTranspose3d(*args, **kwargs), torch.nn.ConvTranspose3d(*args, **kwargs)
    assert ours.weight.shape == tuple(theirs.weight.shape)
    check_layer(ours, theirs, rand(*shape))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_conv_transpose_takes_torchs_positional_order(n):
    # (in, out, kernel, stride, padding, output_padding, groups, bias, dilation)
    args = (4, 2, 3, 2, 1, 1, 2, False, 2)
    ours = getattr(nn, f"ConvTranspose{n}d")(*args)
    theirs = getattr(torch.nn, f"ConvTranspose{n}d")(*args)
    for name in ("stride", "padding", "output_padding", "dilation", "groups"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.bias is None
    check_layer(ours, theirs, rand(1, 4, *(3,) * n))


def test_conv_transpose3d_default_init_has_torchs_ranges():
    lz.manual_seed(0)
    m = nn.ConvTranspose3d(4, 3, 2)
    bound = 1 / np.sqrt(3 * 8)                  # fan_in of the (in, out, k...) weight
    assert np.abs(m.weight.data).max() <= bound and np.abs(m.bias.data).max() <= bound
    assert m.weight.dtype == np.float32


@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"track_running_stats": True},
                                    {"affine": True, "track_running_stats": True,
                                     "momentum": 0.4},
                                    {"affine": True, "track_running_stats": True,
                                     "momentum": None}])
def test_instance_norm3d_train_and_eval(kwargs):
    ours, theirs = nn.InstanceNorm3d(3, **kwargs), torch.nn.InstanceNorm3d(3, **kwargs)
    _randomise(theirs)
    shape = (2, 3, 3, 4, 2)
    for step in range(3):
        check_layer(ours, theirs, rand(*shape, seed=step) * (step + 1), load=step == 0)
    check_buffers(ours, theirs)
    check_layer(ours, theirs, rand(*shape, seed=5), train=False, load=False)
    check_buffers(ours, theirs)          # evaluation leaves the statistics alone
    check_layer(ours, theirs, rand(*shape[1:], seed=6), load=False)               # unbatched
    check_layer(ours, theirs, rand(*shape[1:], seed=7), train=False, load=False)
    check_buffers(ours, theirs)


def test_instance_norm3d_state_dict_keys():
    ours = nn.InstanceNorm3d(4, affine=True, track_running_stats=True)
    theirs = torch.nn.InstanceNorm3d(4, affine=True, track_running_stats=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(nn.InstanceNorm3d(4).state_dict()) == []


@pytest.mark.filterwarnings("ignore:input's size at dim=1 does not match num_features")
def test_parameter_free_instance_norm3d_takes_any_channel_count():
    check_layer(nn.InstanceNorm3d(3), torch.nn.InstanceNorm3d(3), rand(2, 5, 2, 3, 2))


@pytest.mark.parametrize("call,error,match", [
    (lambda: nn.ConvTranspose3d(3, 4, 3, groups=2), ValueError,
     r"ConvTranspose3d: in_channels \(3\) and out_channels \(4\) must be divisible"),
    (lambda: nn.ConvTranspose3d(2, 2, (3, 3)), TypeError,
     r"ConvTranspose3d: kernel_size must be an int or a tuple of 3 ints"),
    (lambda: nn.ConvTranspose3d(2, 2, 3, padding_mode="reflect"), ValueError,
     r"ConvTranspose3d: only padding_mode='zeros'"),
    (lambda: nn.ConvTranspose3d(2, 2, 3)(lz.Variable(rand(1, 2, 3, 3))), ValueError,
     r"ConvTranspose3d: expected input of shape \(N, 2, \.\.\.\) with 3 spatial dims"),
    (lambda: nn.ConvTranspose3d(2, 2, 3)(lz.Variable(rand(1, 3, 3, 3, 3))), ValueError,
     r"ConvTranspose3d: expected input of shape \(N, 2"),
    (lambda: nn.InstanceNorm3d(0), ValueError, r"InstanceNorm3d: num_features must be"),
    (lambda: nn.InstanceNorm3d(3)(lz.Variable(rand(2, 3, 4))), ValueError,
     r"InstanceNorm3d: expected \(N, C, D, H, W\) or \(C, D, H, W\) input"),
    (lambda: nn.InstanceNorm3d(3, affine=True)(lz.Variable(rand(2, 4, 2, 2, 2))), ValueError,
     r"InstanceNorm3d: expected 3 channels"),
    (lambda: nn.InstanceNorm3d(2, affine=True)(lz.Variable(rand(3, 2, 2, 2))), ValueError,
     r"InstanceNorm3d: expected 2 channels"),
])
def test_bad_arguments_and_inputs_name_the_layer(call, error, match):
    with pytest.raises(error, match=match):
        call()
