"""Graph convolutions on dense adjacency: ``GCNConv`` (Kipf and Welling, 2017) and
``GATConv`` (Velickovic et al., 2018), with PyTorch Geometric's names and conventions.

A graph is given as ``edge_index`` (2, E) integer pairs ``(source, target)``: messages
flow from ``edge_index[0]`` to ``edge_index[1]`` and node ``i`` aggregates over the
sources of its incoming edges (list both directions for an undirected graph).  Self loops
are added.  The layers build an (N, N) matrix, so they suit graphs up to a few thousand
nodes (the karate club, citation-sized toy graphs); sparse message passing is not here.

The matrix is built by LeZero operators from ``edge_index`` (``DenseAdjacency``, then
arithmetic), so a traced or exported model computes it from the ``edge_index`` it is
given: its ONNX file takes graphs of any size (``lezero.onnx.export`` with dynamic node
and edge axes).
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Parameter, Variable
from lezero.functions.shape import DenseAdjacency
from lezero.nn import init
from lezero.nn.layers.linear import Linear
from lezero.nn.module import Module
from lezero.utils.checks import check_array, check_bool, check_int, check_number

__all__ = ["DenseAdjacency", "adjacency", "gcn_propagation", "dense_adjacency", "gcn_norm",
           "GCNConv", "GATConv"]


def _check_edges(where, edge_index, num_nodes):
    """``num_nodes`` checked, and ValueError unless ``edge_index`` holds (2, E) integer
    pairs of nodes in 0..num_nodes-1."""
    e = check_array(where, "edge_index", edge_index)
    if e.ndim != 2 or e.shape[0] != 2 or e.dtype.kind not in "iu":
        raise ValueError(f"{where}: edge_index must be integer pairs of shape (2, E), "
                         f"got {e.dtype} {e.shape}")
    num_nodes = check_int(where, "num_nodes", num_nodes, low=1)
    if e.size:
        lo, hi = int(e.min()), int(e.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(f"{where}: edge_index holds node {hi} or {lo}, outside "
                             f"0..{num_nodes - 1}")
    return num_nodes


def adjacency(edge_index, num_nodes, add_self_loops=True, where="adjacency"):
    """The (N, N) 0/1 matrix of ``DenseAdjacency`` as a Variable (traced: a model that
    calls it exports with the graph as an input)."""
    num_nodes = _check_edges(where, edge_index, num_nodes)
    add_self_loops = check_bool(where, "add_self_loops", add_self_loops)
    return DenseAdjacency(num_nodes, add_self_loops)(edge_index)


def gcn_propagation(edge_index, num_nodes, add_self_loops=True, where="gcn_propagation"):
    """Kipf and Welling's propagation matrix ``D^-1/2 (A + I) D^-1/2`` as a Variable,
    ``D`` the (in-)degrees of ``A + I``; a node of degree 0 gets a zero row and column.
    Degrees are whole numbers, so ``min(d, 1) / sqrt(max(d, 1))`` is ``d^-1/2`` and 0
    at 0 without a data-dependent branch."""
    a = adjacency(edge_index, num_nodes, add_self_loops, where)
    deg = F.sum(a, axis=1)
    inv_sqrt = F.minimum(deg, 1.0) / F.sqrt(F.maximum(deg, 1.0))
    return F.reshape(inv_sqrt, (-1, 1)) * a * F.reshape(inv_sqrt, (1, -1))


def dense_adjacency(edge_index, num_nodes, add_self_loops=True):
    """``adjacency`` as a NumPy array: ``A[target, source] = 1`` for every edge (and the
    diagonal when ``add_self_loops``); repeated edges count once."""
    return cuda.as_numpy(adjacency(edge_index, num_nodes, add_self_loops,
                                   "dense_adjacency").data)


def gcn_norm(edge_index, num_nodes, add_self_loops=True):
    """``gcn_propagation`` as a NumPy float32 array."""
    return cuda.as_numpy(gcn_propagation(edge_index, num_nodes, add_self_loops,
                                         "gcn_norm").data)


def on_device_of(x, a):
    """``a`` (an array, or a Variable left as it is: traced) on the device of ``x``."""
    if isinstance(a, Variable):
        return a
    return cuda.get_array_module(check_array("graph layer", "x", x)).asarray(a)


class GCNConv(Module):
    """``X' = D^-1/2 (A + I) D^-1/2 X W^T + b``; ``lin`` (no bias) and ``bias`` as in
    PyG.  ``forward(x, edge_index)`` with ``x`` (N, in_channels)."""

    def __init__(self, in_channels, out_channels, bias=True, add_self_loops=True):
        super().__init__()
        check_int("GCNConv", "in_channels", in_channels, low=1)
        check_int("GCNConv", "out_channels", out_channels, low=1)
        self.add_self_loops = check_bool("GCNConv", "add_self_loops", add_self_loops)
        self.lin = Linear(in_channels, out_channels, bias=False)
        init.xavier_uniform_(self.lin.weight)
        self.bias = Parameter(np.zeros(out_channels, np.float32)) if bias else None

    def forward(self, x, edge_index, norm=None):
        """``norm``: a precomputed ``gcn_norm(edge_index, N)`` (reused across calls)."""
        if norm is None:
            norm = gcn_propagation(on_device_of(x, edge_index), x.shape[0], self.add_self_loops,
                                   "GCNConv")
        out = F.matmul(on_device_of(x, norm), self.lin(x))
        return out + self.bias if self.bias is not None else out


class GATConv(Module):
    """Graph attention: per head, ``e_ij = LeakyReLU(a_dst . W x_i + a_src . W x_j)``
    over the neighbours j of i (self included), ``alpha = softmax_j(e)``, dropout on
    ``alpha`` in training, ``x'_i = sum_j alpha_ij W x_j``; heads concatenated (or averaged
    when ``concat=False``), then ``bias``.  Parameters ``lin.weight`` (heads * out, in),
    ``att_src`` and ``att_dst`` (1, 1, heads, out) and ``bias``, as PyG's."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, negative_slope=0.2,
                 dropout=0.0, add_self_loops=True, bias=True):
        super().__init__()
        where = "GATConv"
        check_int(where, "in_channels", in_channels, low=1)
        self.out_channels = check_int(where, "out_channels", out_channels, low=1)
        self.heads = check_int(where, "heads", heads, low=1)
        self.concat = check_bool(where, "concat", concat)
        self.negative_slope = check_number(where, "negative_slope", negative_slope, low=0)
        self.dropout = check_number(where, "dropout", dropout, low=0, high=1, high_open=True)
        self.add_self_loops = check_bool(where, "add_self_loops", add_self_loops)
        self.lin = Linear(in_channels, heads * out_channels, bias=False)
        init.xavier_uniform_(self.lin.weight)
        self.att_src = Parameter(np.zeros((1, 1, heads, out_channels), np.float32))
        self.att_dst = Parameter(np.zeros((1, 1, heads, out_channels), np.float32))
        init.xavier_uniform_(self.att_src)
        init.xavier_uniform_(self.att_dst)
        width = heads * out_channels if concat else out_channels
        self.bias = Parameter(np.zeros(width, np.float32)) if bias else None

    def attention(self, h, mask):
        """Attention coefficients (heads, N, N) from projected features ``h`` (N, heads,
        out) and the 0/1 float adjacency ``mask`` (N, N) (target, source).  A non-edge
        scores exactly -1e9 (``score * 0 + (0 - 1) * 1e9``), as a masked fill would, but
        by arithmetic, so that the mask stays a traced value."""
        a_src = F.sum(h * self.att_src.reshape(1, self.heads, -1), axis=2)   # (N, heads)
        a_dst = F.sum(h * self.att_dst.reshape(1, self.heads, -1), axis=2)
        scores = a_dst.T.reshape(self.heads, -1, 1) + a_src.T.reshape(self.heads, 1, -1)
        scores = F.leaky_relu(scores, self.negative_slope)
        scores = scores * mask + (mask - 1.0) * 1e9
        return F.softmax(scores, axis=-1)

    def forward(self, x, edge_index, return_attention_weights=False):
        """``x`` (N, in) -> (N, heads * out) or (N, out); with
        ``return_attention_weights`` also the (heads, N, N) coefficients (dense, unlike
        PyG's per-edge list)."""
        n = x.shape[0]
        mask = adjacency(on_device_of(x, edge_index), n, self.add_self_loops, "GATConv")
        h = self.lin(x).reshape(n, self.heads, self.out_channels)
        alpha = self.attention(h, mask)
        out = F.matmul(F.dropout(alpha, self.dropout, training=self.training),
                       h.transpose(1, 0, 2))                                 # (heads, N, out)
        out = out.transpose(1, 0, 2)
        out = out.reshape(n, -1) if self.concat else F.mean(out, axis=1)
        if self.bias is not None:
            out = out + self.bias
        return (out, alpha) if return_attention_weights else out
