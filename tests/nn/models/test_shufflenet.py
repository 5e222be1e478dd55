"""ShuffleNetV2 against torchvision."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import check_default, check_pair, images, tv_models


def test_shufflenet_v2_x1_0_default_configuration_matches_torchvision():
    check_default("shufflenet_v2_x1_0", 2_278_604)


def test_small_shufflenet_matches_torchvision():
    args = ([1, 2, 1], [8, 16, 32, 64, 128])
    ref, ours = tv_models().ShuffleNetV2(*args, num_classes=10), \
        models.ShuffleNetV2(*args, num_classes=10)
    check_pair(ref, ours, images((2, 3, 64, 64)), "conv1.0.weight")


def test_shufflenet_argument_errors():
    with pytest.raises(ValueError, match="stages_repeats must list 3"):
        models.ShuffleNetV2([1, 1], [8, 16, 32, 64, 128])
