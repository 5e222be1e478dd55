"""Train torchvision's architectures, ported to LeZero, on real images.

Twelve families: alexnet, squeezenet1_1, densenet121, resnext50_32x4d, wide_resnet50_2,
shufflenet_v2_x1_0, mobilenet_v3_small, mobilenet_v3_large, efficientnet_b0,
convnext_tiny, vit_b_16, swin_t.  By default each is a CPU-sized member of its family --
the same classes and blocks with fewer or narrower stages (``SMALL`` below; AlexNet,
SqueezeNet, ShuffleNet, MobileNetV3 and EfficientNet-B0 are small already and train at
their full size) -- on scikit-learn's digits upscaled to 32x32 (64x64 for AlexNet, whose
pooling needs at least 63; SqueezeNet too, whose 32x32 maps shrink to 1x1 and barely
learn), 1,024 training images, for the epochs and with the optimizer ``DEFAULTS`` gives
each.  Before every evaluation the batch norms' statistics are recomputed on the training
images ("precise BN"; ``--no-precise-bn`` keeps the moving averages, with which the short
MobileNetV3 and EfficientNet runs score at chance).  ``--full`` builds torchvision's own
configuration (with 10 classes); ``--data cifar10`` trains on CIFAR-10:

    python examples/train_vision_zoo.py --model convnext_tiny
    python examples/train_vision_zoo.py --model all --epochs 3       # each model in turn
    python examples/train_vision_zoo.py --model resnext50_32x4d --full --data cifar10 \\
        --download --limit 0 --epochs 30 --batch-size 128 --lr 0.1

``--model all`` writes each model's run into OUT/NAME/.  Pretrained torchvision weights
come in through ``python -m lezero.convert`` (docs/model_zoo.md), not through this script.
"""
import argparse
import os
import sys

import numpy as np

import _common
from _classify import classifier_parser, load_data, train_classifier
from _common import check_args
from lezero.nn import models

MODELS = ["alexnet", "squeezenet1_1", "densenet121", "resnext50_32x4d", "wide_resnet50_2",
          "shufflenet_v2_x1_0", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
          "convnext_tiny", "vit_b_16", "swin_t"]
# The runs `make zoo-table` (tools/zoo_table.py) makes of this script, one row each.
ZOO_RUNS = [["--model", "alexnet"], ["--model", "squeezenet1_1"], ["--model", "densenet121"],
            ["--model", "resnext50_32x4d"], ["--model", "wide_resnet50_2"],
            ["--model", "shufflenet_v2_x1_0"], ["--model", "mobilenet_v3_small"],
            ["--model", "mobilenet_v3_large"], ["--model", "efficientnet_b0"],
            ["--model", "convnext_tiny"], ["--model", "vit_b_16"], ["--model", "swin_t"]]


def _convnext_small(classes):
    cfg = models.convnext.CNBlockConfig
    return models.ConvNeXt([cfg(32, 64, 2), cfg(64, 128, 2), cfg(128, None, 2)],
                           stochastic_depth_prob=0.1, num_classes=classes)


SMALL = {   # name -> a builder of the CPU-sized member of the family (classes -> Module)
    "alexnet": lambda c: models.alexnet(num_classes=c),
    "squeezenet1_1": lambda c: models.squeezenet1_1(num_classes=c),
    "densenet121": lambda c: models.DenseNet(12, (3, 3, 3, 3), 24, num_classes=c),
    "resnext50_32x4d": lambda c: models.ResNet(models.Bottleneck, [1, 1, 1, 1], groups=8,
                                               width_per_group=4, base_width=16, num_classes=c),
    "wide_resnet50_2": lambda c: models.ResNet(models.Bottleneck, [1, 1, 1, 1],
                                               width_per_group=128, base_width=16,
                                               num_classes=c),
    "shufflenet_v2_x1_0": lambda c: models.shufflenet_v2_x1_0(num_classes=c),
    "mobilenet_v3_small": lambda c: models.mobilenet_v3_small(num_classes=c),
    "mobilenet_v3_large": lambda c: models.mobilenet_v3_large(num_classes=c),
    "efficientnet_b0": lambda c: models.efficientnet_b0(num_classes=c),
    "convnext_tiny": _convnext_small,
    "vit_b_16": lambda c: models.VisionTransformer(32, 4, 4, 4, 64, 128, num_classes=c),
    "swin_t": lambda c: models.SwinTransformer([4, 4], 32, [2, 2], [2, 4], [4, 4],
                                               stochastic_depth_prob=0.0, num_classes=c),
}
# Training defaults per family (flags given on the command line win), chosen in short
# trial runs: the number of epochs each needs on 1,024 digits, and an optimizer that works.
_SGD = dict(optimizer="sgd", lr=0.05, epochs=3)
_ADAMW = dict(optimizer="adamw", lr=2e-3, weight_decay=1e-4, epochs=3)
DEFAULTS = {"alexnet": dict(_ADAMW, lr=1e-4, epochs=6, image_size=64),
            "squeezenet1_1": dict(_ADAMW, lr=1e-3, epochs=10, image_size=64),
            "densenet121": _SGD, "resnext50_32x4d": _SGD, "wide_resnet50_2": _SGD,
            "shufflenet_v2_x1_0": _SGD, "mobilenet_v3_small": _ADAMW,
            "mobilenet_v3_large": _ADAMW, "efficientnet_b0": dict(_ADAMW, epochs=5),
            "convnext_tiny": dict(_ADAMW, weight_decay=0.05, epochs=5),
            "vit_b_16": dict(_ADAMW, lr=1e-3, weight_decay=0.05, epochs=5),
            "swin_t": dict(_ADAMW, lr=3e-3, weight_decay=0.05, epochs=30)}


def build(name, args, classes):
    """The model to train: the small member of the family, or torchvision's own
    configuration with ``--full`` (ViT at the run's image size)."""
    if not args.full:
        return SMALL[name](classes)
    extra = {"image_size": args.image_size} if name == "vit_b_16" else {}
    return models.get_model(name, num_classes=classes, **extra)


def _parser():
    p = classifier_parser("vision_zoo", __doc__, epochs=3, batch_size=64, lr=0.05,
                          image_size=32, channels=3)
    p.add_argument("--model", choices=MODELS + ["all"], default="all",
                   help="the architecture to train (all: each in turn)")
    p.add_argument("--full", action="store_true",
                   help="torchvision's default configuration instead of the small one")
    p.add_argument("--no-precise-bn", dest="precise_bn", action="store_false",
                   help="evaluate with the batch norms' moving averages instead of "
                        "statistics recomputed on the training images after each epoch")
    p.set_defaults(limit=1024)
    return p


def _upscale(data, size):
    """Nearest-neighbour upscaling of (N, C, s, s) images to size x size (CIFAR for
    AlexNet); digits are upscaled by load_data itself."""
    x, t = data
    if x.shape[-1] != size:
        if size % x.shape[-1]:
            raise SystemExit(f"--image-size {size} must be a multiple of {x.shape[-1]}")
        f = size // x.shape[-1]
        x = np.ascontiguousarray(x.repeat(f, axis=2).repeat(f, axis=3))
    return x, t


def run(name, argv, out=None):
    """Parse the flags with ``name``'s defaults under them, then train and report."""
    import lezero as lz
    p = _parser()
    p.set_defaults(**DEFAULTS.get(name, {}))
    args = check_args(p, p.parse_args(argv))
    name = args.model = name if name in MODELS else args.model
    if out is not None:
        args.out = out
        _common.remove_if_left_empty(out)
    if args.smoke:                       # every model in one short process: tiny batches
        args.batch_size = min(args.batch_size, 16)
    lz.manual_seed(args.seed)
    train, test = (_upscale(d, args.image_size) for d in load_data(args))
    if args.smoke:                       # one test batch: a smoke run proves it runs
        test = tuple(a[:args.batch_size] for a in test)
    model = build(name, args, 10)
    label = name if not args.full else f"{name} (full)"
    train_classifier(args, model, train, test, label, precise_bn=args.precise_bn)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--model", default="all")
    pre.add_argument("--out", default=os.path.join("runs", "vision_zoo"))
    pre.add_argument("--resume")
    pre.add_argument("--smoke", action="store_true")
    known, _ = pre.parse_known_args(argv)
    if known.model != "all":
        return run(known.model, argv)
    if known.resume:
        raise SystemExit("--resume needs one --model (a checkpoint belongs to one run)")
    if known.smoke:
        _common.SMOKE_BATCHES = 1        # one batch per model keeps the smoke run short
        if known.out == pre.get_default("out"):
            known.out += "-smoke"        # as check_args does: never over a real run
    for name in MODELS:
        run(name, argv, out=os.path.join(known.out, name))


if __name__ == "__main__":
    main()
