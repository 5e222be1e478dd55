"""Train VGG-11 or VGG-16 (torchvision layout) with the CIFAR-style small-input head.

The defaults (an eighth-width VGG-11 with batch norm on 32x32 upscaled digits,
1024 images) run in
seconds on a CPU; a real run:

    python examples/train_vgg.py --arch vgg16_bn --width 1 --data cifar10 --download \\
        --epochs 60 --batch-size 128 --lr 0.05
"""
from _classify import classifier_parser, run_classifier
from lezero.nn import models

ARCHS = ("vgg11", "vgg11_bn", "vgg16", "vgg16_bn")


def main():
    p = classifier_parser("vgg", __doc__, epochs=4, batch_size=64, lr=0.05)
    p.add_argument("--arch", choices=ARCHS, default="vgg11_bn")
    p.add_argument("--width", type=float, default=0.125,
                   help="multiplies every convolution's width (1 = the paper's)")
    p.add_argument("--dropout", type=float, default=0.3,
                   help="dropout in the classifier (torchvision: 0.5)")
    p.set_defaults(limit=1024)

    def build(args, classes):
        return getattr(models, args.arch)(num_classes=classes, small_input=True,
                                          width_mult=args.width, in_channels=args.channels,
                                          hidden=max(64, int(512 * args.width)),
                                          dropout=args.dropout)

    run_classifier(p, build)


if __name__ == "__main__":
    main()
