"""MobileNetV3 Small and Large against torchvision."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import (assert_same_layout, check_default, check_pair, images,
                                     tv_models)


@pytest.mark.parametrize("name, params", [("mobilenet_v3_small", 2_542_856),
                                          ("mobilenet_v3_large", 5_483_032)])
def test_default_configuration_matches_torchvision(name, params):
    check_default(name, params)


@pytest.mark.parametrize("kw", [dict(reduced_tail=True), dict(dilated=True, width_mult=0.75)])
def test_builder_options_match_torchvision(kw):
    assert_same_layout(tv_models().mobilenet_v3_large(**kw), models.mobilenet_v3_large(**kw))


def test_narrow_mobilenet_v3_small_matches_torchvision():
    kw = dict(width_mult=0.5, num_classes=10, dropout=0.0)
    ref, ours = tv_models().mobilenet_v3_small(**kw), models.mobilenet_v3_small(**kw)
    check_pair(ref, ours, images((2, 3, 64, 64)), "features.0.0.weight")


def test_empty_setting_is_refused():
    with pytest.raises(ValueError, match="MobileNetV3: inverted_residual_setting must not"):
        models.MobileNetV3([], 1024)
