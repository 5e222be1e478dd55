"""ResNeXt, wide ResNets and the deeper ResNets against torchvision."""
import numpy as np
import pytest

from lezero.nn import models
from tests.nn.models._parity import check_default, check_pair, images, tv_models


@pytest.mark.parametrize("name, params", [("resnext50_32x4d", 25_028_904),
                                          ("wide_resnet50_2", 68_883_240)])
def test_default_configuration_matches_torchvision(name, params):
    check_default(name, params)


def test_deeper_variant_has_torchvision_layout():
    # resnet101/152, resnext101_* and wide_resnet101_2 differ from the above only in the
    # blocks per stage and the fixed groups/width; one of them is built here (3 s)
    check_default("resnet101", 44_549_160, shape=None)


@pytest.mark.parametrize("dilation", [None, [False, True, True]])
def test_small_grouped_resnet_matches_torchvision(dilation):
    tv = tv_models()
    kw = dict(groups=4, width_per_group=8, num_classes=10,
              replace_stride_with_dilation=dilation)
    ref = tv.ResNet(tv.resnet.Bottleneck, [1, 1, 1, 1], **kw)
    ours = models.ResNet(models.Bottleneck, [1, 1, 1, 1], **kw)
    # The gradient is compared in float64: in float32 one input of the last block's ReLU
    # lies at 1e-7 of its array's scale (these seeds), so its sign, and with it that
    # element's gradient, follows the rounding of the products before it; through the
    # batch-statistics norms of a batch of two on 2x2 maps a flip moved LeZero's float32
    # gradient of conv1 by 1e-3 to 1e-2 of its scale (which rounding flips it is chance:
    # PyTorch's float32 products kept float64's sign here)
    check_pair(ref, ours, images((2, 3, 64, 64)), "conv1.weight", grad_train=dilation is None,
               grad_rtol=1e-7, grad_dtype=np.float64)


def test_variant_fixes_its_groups():
    with pytest.raises(ValueError, match="resnext50_32x4d: groups is 32 in this variant"):
        models.resnext50_32x4d(groups=8)
