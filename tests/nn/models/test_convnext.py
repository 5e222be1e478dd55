"""ConvNeXt against torchvision."""
import pytest

from lezero.nn import models
from lezero.nn.models import convnext as ours_cn
from tests.nn.models._parity import (assert_forward_equal, check_default, check_pair, images,
                                     load_reference, randomize_, tv_models)


def test_convnext_tiny_default_configuration_matches_torchvision():
    check_default("convnext_tiny", 28_589_128)


def _setting(lib):
    return [lib.CNBlockConfig(16, 32, 1), lib.CNBlockConfig(32, None, 2)]


def test_small_convnext_matches_torchvision():
    tv_cn = tv_models().convnext
    ref = tv_cn.ConvNeXt(_setting(tv_cn), stochastic_depth_prob=0.0, num_classes=10)
    ours = ours_cn.ConvNeXt(_setting(ours_cn), stochastic_depth_prob=0.0, num_classes=10)
    check_pair(ref, ours, images((2, 3, 32, 32)), "features.1.0.block.0.weight")


def test_layer_norm_2d_matches_torchvision():
    import torch
    ref = tv_models().convnext.LayerNorm2d(6, eps=1e-6)
    randomize_(ref)
    ours = models.convnext.LayerNorm2d(6, eps=1e-6)
    load_reference(ref, ours)
    assert_forward_equal(ref, ours, images((2, 6, 3, 5)))
    with pytest.raises(ValueError, match="LayerNorm2d: input must be"):
        ours(images((2, 6, 3)))
    assert torch.is_tensor(ref.weight)


def test_stochastic_depth_schedule_and_keys():
    net = models.convnext_tiny()
    probs = [b.stochastic_depth.p for i in (1, 3, 5, 7) for b in net.features[i]]
    assert probs[0] == 0.0 and probs[-1] == pytest.approx(0.1)
    assert net.features[1][0].layer_scale.shape == (96, 1, 1)
