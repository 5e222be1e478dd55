"""Train LeNet-5 on scikit-learn's handwritten digits (8x8) or CIFAR-10 (32x32).

    python examples/train_lenet.py                    # seconds on digits
    python examples/train_lenet.py --activation tanh --pool avg   # the 1998 original
    python examples/train_lenet.py --data cifar10 --download --channels 3 --epochs 20
"""
from _classify import classifier_parser, run_classifier
from lezero.nn.models import LeNet5


def main():
    p = classifier_parser("lenet", __doc__, epochs=12, batch_size=64, lr=1e-2,
                          image_size=8, channels=1)
    p.add_argument("--activation", choices=("relu", "tanh"), default="relu")
    p.add_argument("--pool", choices=("max", "avg"), default="max")
    p.set_defaults(optimizer="adamw", weight_decay=0.0)     # as in ``make demo``

    def build(args, classes):
        size = 32 if args.data == "cifar10" else args.image_size
        channels = 3 if args.data == "cifar10" else args.channels
        return LeNet5(classes, channels, size, activation=args.activation, pool=args.pool)

    run_classifier(p, build, name="lenet5")


if __name__ == "__main__":
    main()
