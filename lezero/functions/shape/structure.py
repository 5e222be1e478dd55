"""Functions that build 0/1 structure from indices or scores, with no gradient: a graph's
adjacency matrix from its ``edge_index`` (GCN, GAT) and a mixture of experts' top-k
routing and capacity masks.  They are operators (not NumPy in a layer) so that a traced
or exported model computes the structure from its input; their ONNX rules are in
``lezero.onnx.ops_nn`` and ``lezero.onnx.ops_route``.
"""
import numpy as np

from lezero import cuda
from lezero.core import Function

__all__ = ["DenseAdjacency", "RouteTopK", "RouteCapacity", "capacity_of", "fits_capacity"]


class DenseAdjacency(Function):
    """edge_index (2, E) integers -> the (N, N) float32 0/1 matrix with ``A[target,
    source] = 1`` for every edge (repeated edges count once) and, with
    ``add_self_loops``, ones on the diagonal.  Not differentiable (integer input); its
    ONNX form scatters into zeros of the run-time size (``lezero.onnx.ops_nn``)."""

    save_inputs, reads_outputs = (), False

    def __init__(self, num_nodes, add_self_loops):
        self.num_nodes = num_nodes
        self.add_self_loops = add_self_loops

    def forward(self, edge_index):
        xp = cuda.get_array_module(edge_index)
        a = xp.zeros((self.num_nodes, self.num_nodes), dtype=np.float32)
        a[edge_index[1], edge_index[0]] = 1.0
        if self.add_self_loops:
            xp.fill_diagonal(a, 1.0)
        return a

    def backward(self, gy):
        return None


def capacity_of(n, num, den):
    """ceil(n * num / den) in integers: an expert's capacity for ``n`` tokens, where
    num / den = c * k / E."""
    return -(-n * num // den)


def fits_capacity(hits, capacity):
    """Which one-hot assignments ``hits`` (M, E), in priority order, are among the first
    ``capacity`` of their expert (a boolean (M, E), False off the hits)."""
    xp = cuda.get_array_module(hits)
    return (xp.cumsum(hits, axis=0) <= capacity) & (hits != 0)


class RouteTopK(Function):
    """probs (N, E) -> (k, N, E): slot s holds the one-hot of every token's s-th most
    probable expert (ties: the lower id, as ``argsort(kind="stable")`` and ONNX TopK).
    A constant: no gradient (the gates carry it)."""

    def __init__(self, k):
        self.k = k

    def forward(self, probs):
        xp = cuda.get_array_module(probs)
        top = xp.argsort(-probs, axis=-1, kind="stable")[:, :self.k]       # (N, k)
        return (top.T[..., None] == xp.arange(probs.shape[-1])).astype(probs.dtype)

    def backward(self, gy):
        return None


class RouteCapacity(Function):
    """hits (k, N, E) from ``RouteTopK`` -> the same with the assignments beyond their
    expert's capacity ceil(N * num / den) zeroed (first choices first, then earlier
    tokens).  A constant: no gradient."""

    def __init__(self, num, den):
        self.num, self.den = num, den

    def forward(self, hits):
        k, n, e = hits.shape
        keep = fits_capacity(hits.reshape(k * n, e), capacity_of(n, self.num, self.den))
        return hits * keep.reshape(hits.shape).astype(hits.dtype)

    def backward(self, gy):
        return None
