"""DenseNet against torchvision: densenet121's default state_dict and a small DenseNet."""
import pytest

from lezero.nn import models
from tests.nn.models._parity import check_default, check_pair, images, tv_models


def test_densenet121_default_configuration_matches_torchvision():
    check_default("densenet121", 7_978_856)


@pytest.mark.parametrize("name", ["densenet161", "densenet169", "densenet201"])
def test_other_densenets_have_torchvision_layout(name):
    check_default(name, shape=None)


def test_small_densenet_matches_torchvision():
    kw = dict(growth_rate=8, block_config=(2, 3), num_init_features=16, bn_size=2,
              num_classes=10)
    ref, ours = tv_models().DenseNet(**kw), models.DenseNet(**kw)
    check_pair(ref, ours, images((2, 3, 32, 32)), "features.conv0.weight")


def test_densenet_argument_errors():
    with pytest.raises(ValueError, match="DenseNet: growth_rate must be a positive int"):
        models.DenseNet(growth_rate=0)
    with pytest.raises(TypeError, match="DenseNet: memory_efficient must be a bool"):
        models.DenseNet(memory_efficient="yes")


def test_memory_efficient_densenet_computes_the_same():
    pytest.importorskip("lezero.checkpoint")      # lz.checkpoint recomputes the bottlenecks
    import numpy as np
    kw = dict(growth_rate=8, block_config=(2, 2), num_init_features=16, num_classes=5)
    plain, lean = models.DenseNet(**kw), models.DenseNet(memory_efficient=True, **kw)
    lean.load_state_dict(plain.state_dict())
    x = images((2, 3, 32, 32))
    for net in (plain, lean):
        net(x).sum().backward()
    np.testing.assert_allclose(lean.features.conv0.weight.grad.data,
                               plain.features.conv0.weight.grad.data, rtol=1e-5, atol=1e-6)
