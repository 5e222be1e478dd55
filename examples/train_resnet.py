"""Train ResNet-18/34/50 (torchvision names) with a 32x32 (CIFAR-style) stem.

The defaults (ResNet-18 at base width 8 on digits upscaled to 16x16, 1024 images) run
in seconds; a real run:

    python examples/train_resnet.py --arch resnet18 --base-width 64 --data cifar10 \\
        --download --epochs 100 --batch-size 128 --lr 0.1
"""
from _classify import classifier_parser, run_classifier
from lezero.nn import models

ARCHS = ("resnet18", "resnet34", "resnet50")


def main():
    p = classifier_parser("resnet", __doc__, epochs=3, batch_size=64, lr=0.05)
    p.add_argument("--arch", choices=ARCHS, default="resnet18")
    p.add_argument("--base-width", type=int, default=8,
                   help="channels of the first stage (64 = the paper's)")
    p.add_argument("--zero-init-residual", action="store_true")
    p.set_defaults(limit=1024, image_size=16)

    def build(args, classes):
        return getattr(models, args.arch)(num_classes=classes, small_input=True,
                                          base_width=args.base_width,
                                          in_channels=args.channels,
                                          zero_init_residual=args.zero_init_residual)

    run_classifier(p, build)


if __name__ == "__main__":
    main()
