"""EfficientNet (B0 and V2's fused blocks) against torchvision."""
import pytest

from lezero.nn import models
from lezero.nn.models import efficientnet as ours_eff
from tests.nn.models._parity import check_default, check_pair, images, tv_models


def test_efficientnet_b0_default_configuration_matches_torchvision():
    check_default("efficientnet_b0", 5_288_548)


@pytest.mark.parametrize("name", ["efficientnet_b3", "efficientnet_b5", "efficientnet_v2_s"])
def test_other_variants_have_torchvision_layout(name):
    ref, ours = check_default(name, shape=None)
    assert ours.features[1][0].block[0][1].eps == ref.features[1][0].block[0][1].eps


def _setting(lib, fused_first):
    """The same small network in torchvision's and LeZero's configuration classes."""
    rows = [(1, 3, 1, 16, 8, 1), (6, 3, 2, 8, 16, 2), (4, 5, 2, 16, 24, 1)]
    setting = [lib.MBConvConfig(*row) for row in rows]
    if fused_first:
        setting[:1] = [lib.FusedMBConvConfig(1, 3, 1, 16, 16, 1),
                       lib.FusedMBConvConfig(4, 3, 1, 16, 8, 1)]
    return setting


@pytest.mark.parametrize("fused_first", [False, True])
def test_small_efficientnet_matches_torchvision(fused_first):
    tv_eff = tv_models().efficientnet
    kw = dict(dropout=0.0, stochastic_depth_prob=0.0, num_classes=10)
    ref = tv_eff.EfficientNet(_setting(tv_eff, fused_first), **kw)
    ours = ours_eff.EfficientNet(_setting(ours_eff, fused_first), **kw)
    check_pair(ref, ours, images((2, 3, 32, 32)), "features.0.0.weight")


def test_stochastic_depth_grows_with_depth():
    net = models.efficientnet_b0(stochastic_depth_prob=0.4)
    probs = [b.stochastic_depth.p for stage in list(net.features)[1:-1] for b in stage]
    assert probs[0] == 0.0 and probs[-1] == pytest.approx(0.4 * 15 / 16)
    assert probs == sorted(probs)


def test_bad_setting_is_a_type_error():
    with pytest.raises(TypeError, match="EfficientNet: inverted_residual_setting entries"):
        models.EfficientNet([(1, 3, 1, 32, 16, 1)], dropout=0.2)
