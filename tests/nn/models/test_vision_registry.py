"""Every torchvision model of the zoo is reachable by its name and refuses downloads."""
import pytest

from lezero.nn import models

VISION = ["alexnet", "squeezenet1_1", "densenet121", "resnext50_32x4d", "wide_resnet50_2",
          "shufflenet_v2_x1_0", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
          "convnext_tiny", "vit_b_16", "swin_t", "resnet18", "vgg11", "mobilenet_v2"]


def test_vision_models_are_listed():
    assert set(VISION) <= set(models.list_models())


@pytest.mark.parametrize("name", VISION)
def test_weights_other_than_none_are_refused(name):
    with pytest.raises(ValueError, match=f"{name.rstrip('1')}.*weights='IMAGENET1K_V1'.*"
                                         "lezero.convert"):
        models.get_model(name, weights="IMAGENET1K_V1")
    with pytest.raises(TypeError, match="progress must be a bool"):
        models.get_model(name, progress="yes")


def test_get_model_passes_constructor_arguments():
    net = models.get_model("squeezenet1_1", num_classes=7, weights=None, progress=False)
    assert net.classifier[1].out_channels == 7
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_class'"):
        models.get_model("alexnet", num_class=7)
