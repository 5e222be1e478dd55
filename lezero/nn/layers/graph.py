"""Graph convolutions on dense adjacency: ``GCNConv`` (Kipf and Welling, 2017) and
``GATConv`` (Velickovic et al., 2018), with PyTorch Geometric's names and conventions.

A graph is given as ``edge_index`` (2, E) integer pairs ``(source, target)``: messages
flow from ``edge_index[0]`` to ``edge_index[1]`` and node ``i`` aggregates over the
sources of its incoming edges (list both directions for an undirected graph).  Self loops
are added.  The layers build an (N, N) matrix, so they suit graphs up to a few thousand
nodes (the karate club, citation-sized toy graphs); sparse message passing is not here.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Parameter
from lezero.nn import init
from lezero.nn.layers.linear import Linear
from lezero.nn.module import Module
from lezero.utils.checks import check_array, check_bool, check_int, check_number

__all__ = ["dense_adjacency", "gcn_norm", "GCNConv", "GATConv"]


def dense_adjacency(edge_index, num_nodes, add_self_loops=True):
    """(N, N) float32 matrix with ``A[target, source] = 1`` for every edge (and the
    diagonal when ``add_self_loops``); repeated edges count once."""
    e = np.asarray(cuda.as_numpy(check_array("dense_adjacency", "edge_index", edge_index)))
    if e.ndim != 2 or e.shape[0] != 2 or e.dtype.kind not in "iu":
        raise ValueError(f"dense_adjacency: edge_index must be integer pairs of shape (2, E), "
                         f"got {e.dtype} {e.shape}")
    num_nodes = check_int("dense_adjacency", "num_nodes", num_nodes, low=1)
    if e.size and (e.min() < 0 or e.max() >= num_nodes):
        raise ValueError(f"dense_adjacency: edge_index holds node {int(e.max())} or "
                         f"{int(e.min())}, outside 0..{num_nodes - 1}")
    a = np.zeros((num_nodes, num_nodes), dtype=np.float32)
    a[e[1], e[0]] = 1.0
    if add_self_loops:
        np.fill_diagonal(a, 1.0)
    return a


def gcn_norm(edge_index, num_nodes, add_self_loops=True):
    """Kipf and Welling's propagation matrix ``D^-1/2 (A + I) D^-1/2`` (dense, float32),
    ``D`` the (in-)degrees of ``A + I``."""
    a = dense_adjacency(edge_index, num_nodes, add_self_loops)
    deg = a.sum(axis=1)
    inv_sqrt = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
    return (inv_sqrt[:, None] * a * inv_sqrt[None, :]).astype(np.float32)


def _xp_like(x, array):
    return cuda.get_array_module(check_array("graph layer", "x", x)).asarray(array)


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
        n = x.shape[0]
        norm = gcn_norm(edge_index, n, self.add_self_loops) if norm is None else norm
        out = F.matmul(_xp_like(x, norm), self.lin(x))
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
        out) and the 0/1 adjacency ``mask`` (N, N) (target, source)."""
        a_src = F.sum(h * self.att_src.reshape(1, self.heads, -1), axis=2)   # (N, heads)
        a_dst = F.sum(h * self.att_dst.reshape(1, self.heads, -1), axis=2)
        scores = a_dst.T.reshape(self.heads, -1, 1) + a_src.T.reshape(self.heads, 1, -1)
        scores = F.leaky_relu(scores, self.negative_slope)
        scores = F.masked_fill(scores, _xp_like(h, mask == 0)[None], -1e9)
        return F.softmax(scores, axis=-1)

    def forward(self, x, edge_index, return_attention_weights=False):
        """``x`` (N, in) -> (N, heads * out) or (N, out); with
        ``return_attention_weights`` also the (heads, N, N) coefficients (dense, unlike
        PyG's per-edge list)."""
        n = x.shape[0]
        mask = dense_adjacency(edge_index, n, self.add_self_loops)
        h = self.lin(x).reshape(n, self.heads, self.out_channels)
        alpha = self.attention(h, mask)
        out = F.matmul(F.dropout(alpha, self.dropout, training=self.training),
                       h.transpose(1, 0, 2))                                 # (heads, N, out)
        out = out.transpose(1, 0, 2)
        out = out.reshape(n, -1) if self.concat else F.mean(out, axis=1)
        if self.bias is not None:
            out = out + self.bias
        return (out, alpha) if return_attention_weights else out
