"""The Vision Transformer against torchvision."""
import pytest

from lezero.nn import models
from lezero.nn.models import vision_transformer as ours_vit
from tests.nn.models._parity import check_default, check_pair, images, tv_models

SMALL = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16,
             mlp_dim=32, num_classes=10)


def test_vit_b_16_default_configuration_matches_torchvision():
    check_default("vit_b_16", 86_567_656, shape=(1, 3, 224, 224))


def test_vit_b_16_accepts_other_image_sizes():
    net = models.vit_b_16(image_size=32, num_classes=10)
    assert net.encoder.pos_embedding.shape == (1, 5, 768)
    assert net(images((1, 3, 32, 32))).shape == (1, 10)


def test_small_vit_matches_torchvision():
    ref = tv_models().VisionTransformer(**SMALL)
    check_pair(ref, models.VisionTransformer(**SMALL), images((2, 3, 32, 32)),
               "conv_proj.weight")


@pytest.mark.parametrize("kw", [dict(representation_size=12), "conv_stem"])
def test_vit_options_match_torchvision(kw):
    tv_vit = tv_models().vision_transformer
    if kw == "conv_stem":
        ref = tv_vit.VisionTransformer(**SMALL, conv_stem_configs=[
            tv_vit.ConvStemConfig(8, 3, 2), tv_vit.ConvStemConfig(12, 3, 4)])
        ours = ours_vit.VisionTransformer(**SMALL, conv_stem_configs=[
            ours_vit.ConvStemConfig(8, 3, 2), ours_vit.ConvStemConfig(12, 3, 4)])
    else:
        ref, ours = tv_vit.VisionTransformer(**SMALL, **kw), \
            ours_vit.VisionTransformer(**SMALL, **kw)
    check_pair(ref, ours, images((2, 3, 32, 32)), "encoder.layers.encoder_layer_0.ln_1.weight")


def test_vit_checks_its_arguments_and_input():
    with pytest.raises(ValueError, match="image_size \\(30\\) must be a multiple of patch"):
        models.VisionTransformer(**dict(SMALL, image_size=30))
    with pytest.raises(ValueError, match="input must be \\(N, 3, 32, 32\\)"):
        models.VisionTransformer(**SMALL)(images((1, 3, 16, 16)))
