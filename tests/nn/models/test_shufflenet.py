"""ShuffleNetV2 against torchvision."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import (assert_forward_equal, assert_same_layout, check_pair,
                                     images, load_reference, randomize_, tv_models)


def test_shufflenet_v2_x1_0_default_configuration_matches_torchvision():
    ref, ours = tv_models().shufflenet_v2_x1_0(), models.shufflenet_v2_x1_0()
    assert_same_layout(ref, ours)
    assert ours.num_parameters() == 2_278_604
    load_reference(randomize_(ref), ours)
    assert_forward_equal(ref, ours, images((1, 3, 32, 32)))


def test_small_shufflenet_matches_torchvision():
    args = ([1, 2, 1], [8, 16, 32, 64, 128])
    ref, ours = tv_models().ShuffleNetV2(*args, num_classes=10), \
        models.ShuffleNetV2(*args, num_classes=10)
    check_pair(ref, ours, images((2, 3, 64, 64)), "conv1.0.weight")


def test_shufflenet_argument_errors():
    with pytest.raises(ValueError, match="stages_repeats must list 3"):
        models.ShuffleNetV2([1, 1], [8, 16, 32, 64, 128])
