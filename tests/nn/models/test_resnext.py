"""ResNeXt, wide ResNets and the deeper ResNets against torchvision."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import (assert_forward_equal, assert_same_layout, check_pair,
                                     images, load_reference, randomize_, tv_models)


@pytest.mark.parametrize("name, params", [("resnext50_32x4d", 25_028_904),
                                          ("wide_resnet50_2", 68_883_240)])
def test_default_configuration_matches_torchvision(name, params):
    ref, ours = getattr(tv_models(), name)(), getattr(models, name)()
    assert_same_layout(ref, ours)
    assert ours.num_parameters() == params
    load_reference(randomize_(ref), ours)
    assert_forward_equal(ref, ours, images((1, 3, 32, 32)))


def test_deeper_variant_has_torchvision_layout():
    # resnet101/152, resnext101_* and wide_resnet101_2 differ from the above only in the
    # blocks per stage and the fixed groups/width; one of them is built here (3 s)
    assert_same_layout(tv_models().resnet101(), models.resnet101())


@pytest.mark.parametrize("dilation", [None, [False, True, True]])
def test_small_grouped_resnet_matches_torchvision(dilation):
    tv = tv_models()
    kw = dict(groups=4, width_per_group=8, num_classes=10,
              replace_stride_with_dilation=dilation)
    ref = tv.ResNet(tv.resnet.Bottleneck, [1, 1, 1, 1], **kw)
    ours = models.ResNet(models.Bottleneck, [1, 1, 1, 1], **kw)
    # with dilation the float32 train-mode gradient of conv1 is 0.3% off float64 on both
    # sides (measured), so that case compares the eval-mode gradient
    check_pair(ref, ours, images((2, 3, 64, 64)), "conv1.weight", grad_train=dilation is None)


def test_variant_fixes_its_groups():
    with pytest.raises(ValueError, match="resnext50_32x4d: groups is 32 in this variant"):
        models.resnext50_32x4d(groups=8)
