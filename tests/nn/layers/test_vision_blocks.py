"""torchvision.ops' building blocks in lezero.nn: StochasticDepth, Permute,
Conv2dNormActivation, SqueezeExcitation (parity with torchvision where it has them)."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from lezero.testing.oracles import import_torchvision
from tests.nn.models._parity import (assert_forward_equal, assert_grad_equal, assert_same_layout,
                                     images, load_reference, randomize_)


def ops():
    return import_torchvision().ops


def test_stochastic_depth_row_mode_drops_whole_samples():
    lz.manual_seed(0)
    layer = nn.StochasticDepth(0.5, "row")
    x = lz.Variable(np.ones((400, 3, 2), np.float32))
    y = layer(x).data
    per_sample = y.reshape(400, -1)
    assert set(np.unique(per_sample)) == {0.0, 2.0}            # kept samples scaled by 2
    assert np.all(per_sample.min(axis=1) == per_sample.max(axis=1))
    assert 150 < int((per_sample[:, 0] == 0).sum()) < 250
    out = layer(x)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.data, out.data)       # d(x * noise)/dx = noise


def test_stochastic_depth_batch_mode_eval_and_seed():
    x = lz.Variable(np.ones((6, 4), np.float32))
    layer = nn.StochasticDepth(0.3, "batch")
    lz.manual_seed(3)
    a = layer(x).data
    lz.manual_seed(3)
    b = layer(x).data
    np.testing.assert_array_equal(a, b)
    assert np.unique(a).size == 1 and float(a[0, 0]) in (0.0, pytest.approx(1 / 0.7))
    layer.eval()
    assert layer(x) is x
    assert nn.StochasticDepth(0.0, "row")(x) is x
    np.testing.assert_array_equal(nn.StochasticDepth(1.0, "row")(x).data, 0.0)


def test_stochastic_depth_arguments():
    with pytest.raises(ValueError, match="StochasticDepth: p must be in \\[0.0, 1.0\\]"):
        nn.StochasticDepth(1.5, "row")
    with pytest.raises(ValueError, match="StochasticDepth: mode must be one of 'batch', 'row'"):
        nn.StochasticDepth(0.1, "col")
    with pytest.raises(TypeError, match="StochasticDepth: p must be a number"):
        nn.StochasticDepth("0.1", "row")


def test_permute():
    x = images((2, 3, 4, 5))
    np.testing.assert_array_equal(nn.Permute([0, 2, 3, 1])(x).data, x.transpose(0, 2, 3, 1))
    with pytest.raises(ValueError, match="Permute: dims must be a permutation"):
        nn.Permute([0, 2, 2, 1])
    with pytest.raises(ValueError, match="Permute: input must be 4-D"):
        nn.Permute([0, 2, 3, 1])(images((2, 3)))


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2),
                                dict(kernel_size=(3, 5), dilation=2, groups=2),
                                dict(kernel_size=1, norm_layer=None),
                                dict(kernel_size=3, activation_layer=None, bias=True)])
def test_conv2d_norm_activation_matches_torchvision(kw):
    torch.manual_seed(0)
    ref = ops().Conv2dNormActivation(4, 6, **kw)       # the same arguments (None or not)
    ours = nn.Conv2dNormActivation(4, 6, **kw)
    assert_same_layout(ref, ours)
    load_reference(randomize_(ref), ours)
    assert_forward_equal(ref, ours, images((2, 4, 9, 9)))
    assert ours[0].padding == ref[0].padding


def test_squeeze_excitation_matches_torchvision():
    torch.manual_seed(0)
    ref = ops().SqueezeExcitation(8, 3, scale_activation=torch.nn.Hardsigmoid)
    ours = nn.SqueezeExcitation(8, 3, scale_activation=nn.Hardsigmoid)
    assert_same_layout(ref, ours)
    load_reference(ref, ours)
    x = images((2, 8, 5, 5))
    assert_forward_equal(ref, ours, x)
    assert_grad_equal(ref, ours, x, "fc1.weight")
    with pytest.raises(ValueError, match="SqueezeExcitation: squeeze_channels must be a positive int"):
        nn.SqueezeExcitation(8, 0)
