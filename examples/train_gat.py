"""Train a graph attention network (Velickovic et al., 2018; 8 heads of 8 units, then one
averaged head, dropout 0.6) on Zachary's karate club (two members labelled) and on a
generated stochastic block model, and report the accuracy on the unlabelled nodes.

    python examples/train_gat.py                  # seconds
    python examples/train_gat.py --heads 4 --epochs 400
"""
from lezero.nn.models import GAT

from _graphs import graph_parser, run


def main():
    p = graph_parser("gat", __doc__, epochs=200, lr=0.005, weight_decay=5e-4)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    known = p.parse_known_args()[0]
    run(p, lambda n_in, n_out: GAT(n_in, known.hidden, n_out, heads=known.heads), "GAT")


if __name__ == "__main__":
    main()
