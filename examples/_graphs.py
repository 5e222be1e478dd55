"""Node classification shared by train_gcn.py and train_gat.py: full-batch training on
Zachary's karate club and on a generated stochastic block model, test accuracy of each."""
import os
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data.datasets import karate_club, stochastic_block_model

from _common import check_args, make_parser, require, smoke_limit, write_summary
from _zoo import progress

require("networkx")                   # the examples extra, before any work


def graph_parser(name, description, epochs, lr, weight_decay):
    p = make_parser(name, description, epochs=epochs, batch_size=1, lr=lr)
    p.add_argument("--weight-decay", type=float, default=weight_decay)
    return p


def train_on(graph, build, args):
    """Train a fresh model full-batch; returns (test accuracy, parameters)."""
    lz.manual_seed(args.seed)
    model = build(graph.x.shape[1], graph.num_classes)
    opt = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train = np.nonzero(graph.train_mask)[0]
    for _ in progress(smoke_limit(range(args.epochs)), total=args.epochs, desc=graph.name):
        logits = model(graph.x, graph.edge_index)
        loss = F.cross_entropy(logits[train], graph.y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with lz.no_grad():
        pred = model(graph.x, graph.edge_index).data.argmax(axis=1)
    test = graph.test_mask
    return float((pred[test] == graph.y[test]).mean()), model.num_parameters()


def run(parser, build, model_name):
    """Both graphs, printed and summarised (the karate club's accuracy is the headline)."""
    args = check_args(parser, parser.parse_args())
    if args.resume or args.stop_after:
        parser.error("--resume/--stop-after: these runs take seconds and keep no checkpoint")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    results = {}
    for graph in (karate_club(), stochastic_block_model(seed=args.seed)):
        acc, params = train_on(graph, build, args)
        results[graph.name] = acc
        print(f"{model_name} on {graph!r}: test accuracy {acc * 100:.1f}% "
              f"({int(graph.test_mask.sum())} unlabelled nodes, {params:,} parameters)")
    karate, sbm = results.values()
    write_summary(args, model_name.lower(), "node classification",
                  "karate club (2 labels); SBM 4x100", "karate_test_acc", karate,
                  time.perf_counter() - t0, sbm_test_acc=sbm)
