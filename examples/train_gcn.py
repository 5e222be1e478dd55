"""Train a two-layer GCN (Kipf and Welling, 2017) for node classification on Zachary's
karate club (only the instructor and the administrator labelled; one-hot node features)
and on a generated stochastic block model (4 communities, noisy features, 10 labels
each), and report the accuracy on the unlabelled nodes.

    python examples/train_gcn.py                  # seconds
    python examples/train_gcn.py --epochs 400 --lr 0.005
"""
from lezero.nn.models import GCN

from _graphs import graph_parser, run


def main():
    p = graph_parser("gcn", __doc__, epochs=200, lr=0.01, weight_decay=5e-4)
    p.add_argument("--hidden", type=int, default=16)
    args_hidden = p.parse_known_args()[0].hidden
    run(p, lambda n_in, n_out: GCN(n_in, args_hidden, n_out, dropout=0.5), "GCN")


if __name__ == "__main__":
    main()
