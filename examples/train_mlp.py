"""Train an MLP (torchvision.ops.MLP layout) on scikit-learn's handwritten digits.

    python examples/train_mlp.py                      # seconds, ~97% test accuracy
    python examples/train_mlp.py --hidden 256 256 --dropout 0.2 --epochs 30
"""
from _classify import classifier_parser, run_classifier
from lezero.nn.models import MLP


def main():
    p = classifier_parser("mlp", __doc__, epochs=10, batch_size=64, lr=0.05,
                          image_size=8, channels=1)
    p.add_argument("--hidden", type=int, nargs="+", default=[128, 64],
                   help="widths of the hidden layers")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="dropout after each hidden layer")

    def build(args, classes):
        inputs = args.channels * args.image_size ** 2 if args.data == "digits" else 3 * 32 * 32
        return MLP(inputs, args.hidden + [classes], dropout=args.dropout, flatten=True)

    run_classifier(p, build, name="mlp")


if __name__ == "__main__":
    main()
