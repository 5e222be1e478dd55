"""Train MobileNetV2 (torchvision names) with a stride-1 stem for 32x32 images.

The defaults (width 0.25 on digits upscaled to 16x16, 1024 images) run in seconds; a real run:

    python examples/train_mobilenet.py --width 1 --data cifar10 --download --epochs 100 \\
        --batch-size 128 --lr 0.05
"""
from _classify import classifier_parser, run_classifier
from lezero.nn.models import MobileNetV2


def main():
    p = classifier_parser("mobilenet", __doc__, epochs=5, batch_size=64, lr=0.05)
    p.add_argument("--width", type=float, default=0.25, help="width multiplier")
    p.add_argument("--dropout", type=float, default=0.2,
                   help="dropout before the classifier")
    p.set_defaults(limit=1024, image_size=16, weight_decay=4e-5)

    def build(args, classes):
        return MobileNetV2(classes, width_mult=args.width, dropout=args.dropout,
                           in_channels=args.channels, small_input=True)

    run_classifier(p, build, name="mobilenet_v2")


if __name__ == "__main__":
    main()
