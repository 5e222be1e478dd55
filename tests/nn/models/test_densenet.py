"""DenseNet against torchvision: densenet121's default state_dict and a small DenseNet."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import (assert_forward_equal, assert_same_layout, check_pair,
                                     images, load_reference, randomize_, tv_models)


def test_densenet121_default_configuration_matches_torchvision():
    ref, ours = tv_models().densenet121(), models.densenet121()
    assert_same_layout(ref, ours)
    assert ours.num_parameters() == 7_978_856
    load_reference(randomize_(ref), ours)
    assert_forward_equal(ref, ours, images((1, 3, 32, 32)))


@pytest.mark.parametrize("name", ["densenet161", "densenet169", "densenet201"])
def test_other_densenets_have_torchvision_layout(name):
    assert_same_layout(getattr(tv_models(), name)(), getattr(models, name)())


def test_small_densenet_matches_torchvision():
    kw = dict(growth_rate=8, block_config=(2, 3), num_init_features=16, bn_size=2,
              num_classes=10)
    ref, ours = tv_models().DenseNet(**kw), models.DenseNet(**kw)
    check_pair(ref, ours, images((2, 3, 32, 32)), "features.conv0.weight")


def test_densenet_argument_errors():
    with pytest.raises(ValueError, match="DenseNet: growth_rate must be >= 1"):
        models.DenseNet(growth_rate=0)
    with pytest.raises(TypeError, match="DenseNet: memory_efficient must be a bool"):
        models.DenseNet(memory_efficient="yes")
