"""Node-classification graphs: Zachary's karate club (real, shipped by networkx) and a
generated stochastic block model.

Each is a ``Graph``: ``x`` float32 (N, features), ``edge_index`` int64 (2, E) with both
directions of every undirected edge (PyTorch Geometric's layout), ``y`` int64 (N,),
boolean ``train_mask`` / ``test_mask`` and ``num_classes``.
"""
import numpy as np

from lezero.utils.checks import check_int, check_number

__all__ = ["Graph", "karate_club", "stochastic_block_model"]


class Graph:
    """A graph with node features, labels and a train/test split of its nodes."""

    def __init__(self, x, edge_index, y, train_mask, test_mask, name=""):
        self.x, self.edge_index, self.y = x, edge_index, y
        self.train_mask, self.test_mask, self.name = train_mask, test_mask, name
        self.num_nodes, self.num_classes = len(y), int(y.max()) + 1

    def __repr__(self):
        return (f"Graph({self.name!r}, nodes={self.num_nodes}, "
                f"edges={self.edge_index.shape[1] // 2}, features={self.x.shape[1]}, "
                f"classes={self.num_classes}, train={int(self.train_mask.sum())})")


def _networkx():
    try:
        import networkx
    except ImportError as e:
        raise ImportError("the graph datasets need networkx: pip install networkx") from e
    return networkx


def _undirected_edge_index(graph):
    e = np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2).T
    return np.concatenate([e, e[::-1]], axis=1)


def karate_club(labelled=(0, 33)):
    """Zachary's karate club (34 members, 78 friendships): the class is the faction each
    member joined after the split (``'club'``: 0 "Mr. Hi", 1 "Officer").  Features are
    one-hot node ids (no information beyond the graph); only the ``labelled`` members
    (the instructor and the administrator by default) are in the training set and all
    others are tested, the semi-supervised setting of Kipf and Welling's demo."""
    nx = _networkx()
    g = nx.karate_club_graph()
    y = np.array([0 if g.nodes[i]["club"] == "Mr. Hi" else 1 for i in range(len(g))],
                 dtype=np.int64)
    train = np.zeros(len(g), dtype=bool)
    train[list(labelled)] = True
    return Graph(np.eye(len(g), dtype=np.float32), _undirected_edge_index(g), y, train,
                 ~train, "karate club")


def stochastic_block_model(block_sizes=(100, 100, 100, 100), p_in=0.1, p_out=0.01,
                           num_features=16, feature_noise=2.0, train_per_class=10, seed=0):
    """A generated community graph: nodes in block ``k`` link to each other with
    probability ``p_in`` and to other blocks with ``p_out``; node features are the
    block's random unit-norm centre plus Gaussian noise of std ``feature_noise`` per
    coordinate (so features alone are a weak guide and the graph must help).
    ``train_per_class`` random nodes per block are labelled, the rest tested."""
    where = "stochastic_block_model"
    sizes = [check_int(where, "block_sizes", s, low=2) for s in block_sizes]
    p_in = check_number(where, "p_in", p_in, low=0, high=1)
    p_out = check_number(where, "p_out", p_out, low=0, high=1)
    num_features = check_int(where, "num_features", num_features, low=1)
    feature_noise = check_number(where, "feature_noise", feature_noise, low=0)
    per_class = check_int(where, "train_per_class", train_per_class, low=1,
                          high=min(sizes) - 1)
    nx = _networkx()
    k = len(sizes)
    probs = [[p_in if i == j else p_out for j in range(k)] for i in range(k)]
    g = nx.stochastic_block_model(sizes, probs, seed=seed)
    y = np.repeat(np.arange(k), sizes).astype(np.int64)
    rng = np.random.default_rng([seed, 5])
    centres = rng.standard_normal((k, num_features))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[y] + feature_noise * rng.standard_normal((len(y), num_features))
    train = np.zeros(len(y), dtype=bool)
    for c in range(k):
        train[rng.choice(np.nonzero(y == c)[0], per_class, replace=False)] = True
    return Graph(x.astype(np.float32), _undirected_edge_index(g), y, train, ~train,
                 f"SBM {k}x{sizes[0]} p_in={p_in} p_out={p_out}")
