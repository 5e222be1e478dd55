"""AlexNet and SqueezeNet against torchvision: the default builders' state_dicts load
strictly; eval and train-mode outputs and a gradient equal."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import check_default, check_pair, images, tv_models


def test_alexnet_default_configuration_matches_torchvision():
    # dropout=0 so that train mode is deterministic; the layout is the default one
    ref, ours = tv_models().alexnet(dropout=0.0), models.alexnet(dropout=0.0)
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters()) == 61_100_840
    check_pair(ref, ours, images((2, 3, 64, 64)), "features.0.weight")


def test_alexnet_rejects_too_small_images():
    with pytest.raises(ValueError, match="AlexNet: input must be .* >= 63"):
        models.alexnet(num_classes=2)(images((1, 3, 32, 32)))


@pytest.mark.parametrize("name", ["squeezenet1_0", "squeezenet1_1"])
def test_squeezenet_matches_torchvision(name):
    ref = getattr(tv_models(), name)(num_classes=10, dropout=0.0)
    ours = getattr(models, name)(num_classes=10, dropout=0.0)
    check_pair(ref, ours, images((2, 3, 64, 64)), "features.3.expand3x3.weight")


def test_squeezenet_default_layout():
    check_default("squeezenet1_1", 1_235_496, shape=(1, 3, 48, 48))


def test_squeezenet_bad_version():
    with pytest.raises(ValueError, match="SqueezeNet: version must be one of '1_0', '1_1'"):
        models.SqueezeNet("1_2")
