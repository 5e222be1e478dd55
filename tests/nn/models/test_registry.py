"""nn.models.get_model / list_models / register_model, as torchvision's registry."""
import pytest

from lezero import nn
from lezero.nn import models
from lezero.nn.models import registry


def test_every_listed_name_builds_a_module():
    names = models.list_models()
    assert names == sorted(names) and len(names) == len(set(names))
    assert {"resnet18", "mobilenet_v2", "lenet5", "gpt_mini", "vgg11"} <= set(names)
    assert isinstance(models.get_model("lenet5"), nn.Module)


def test_keyword_arguments_reach_the_builder():
    net = models.get_model("resnet18", num_classes=7)
    assert net.fc.out_features == 7
    assert models.get_model("RESNET18", num_classes=3).fc.out_features == 3   # any case


def test_unknown_names_suggest_close_ones():
    with pytest.raises(ValueError, match=r"unknown model 'resnet19'; did you mean 'resnet18'"):
        models.get_model("resnet19")
    with pytest.raises(TypeError, match="get_model: name must be a model name"):
        models.get_model(18)


def test_register_model_refuses_a_second_builder_under_one_name():
    def first():
        return nn.Identity()

    def second():
        return nn.Identity()

    try:
        registry.register_model("zz_test_model")(first)
        assert registry.register_model("zz_test_model")(first) is first   # same: fine
        with pytest.raises(ValueError, match="'zz_test_model' is registered twice"):
            registry.register_model("zz_test_model")(second)
        assert isinstance(models.get_model("zz_test_model"), nn.Identity)
    finally:
        registry._MODELS.pop("zz_test_model", None)
