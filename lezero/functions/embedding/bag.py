"""``embedding_bag``: sums, means or maxima of bags of embedding rows (PyTorch semantics).

A bag is a run of indices: the rows of a 2-D input (B, N), or the pieces of a 1-D input
cut at ``offsets``.  Everything is vectorised over a *bag plan* (``bag_plan.Bags``): the
kept entries (padding removed), each with its weight row ``idx``, its bag ``seg`` and its
position ``pos`` in the flattened input.  Bag sums are segment sums (a scatter-add by
``seg``), and weight gradients a scatter-add by ``idx``, both through ``scatter_add_``
(a Numba kernel on the CPU).

Sum and mean are one bilinear map ``out[b] = sum_k s_k c_k w[idx_k]`` (``s`` a constant
per-entry scale: 1 / bag size for mean; ``c`` the optional per-sample weights), so the
three Functions below -- the map, its weight gradient and its per-sample-weight gradient
-- are each other's derivatives, and any order of differentiation works.  Max mode picks
one row per output element; its gradient and the gradient's gradient are a scatter and
a gather of the same picks.
"""
import math

import numpy as np

from lezero.backends import get_backend
from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.embedding.bag_plan import (OP, bag_bounds, check_options,
                                                check_per_sample_weights, check_tables,
                                                make_bags)
from lezero.functions.embedding.lookup import check_indices, check_padding_idx, renorm_rows_
from lezero.functions.registry import register
from lezero.kernels.scatter import scatter_add_

__all__ = ["embedding_bag"]

def _coefficients(scale, psw, bags, dtype):
    """The per-entry factor ``scale * psw[pos]`` (None when both are absent)."""
    coef = None if scale is None else scale.astype(dtype, copy=False)
    if psw is not None:
        picked = psw.reshape(-1)[bags.pos].astype(dtype, copy=False)
        coef = picked if coef is None else coef * picked
    return coef


def _segment_sum(bags, rows):
    """(B, dim): the sum of the kept entries' ``rows`` in each bag (zeros when empty)."""
    out = xp_of(rows).zeros((bags.n_bags,) + rows.shape[1:], dtype=rows.dtype)
    scatter_add_(out, bags.seg, rows)
    return out


class EmbeddingBagSum(Function):
    """(weight[, per_sample_weights]) -> out[b] = sum over bag b of s_k c_k weight[idx_k].

    ``scale`` (s: None or one value per kept entry) is part of the map; ``grad_scale``
    replaces it in the weight gradient only (scale_grad_by_freq), as PyTorch does.
    """

    def __init__(self, bags, scale=None, grad_scale=None):
        self.bags = bags
        self.scale = scale
        self.grad_scale = scale if grad_scale is None else grad_scale

    def forward(self, w, psw=None):
        xp = xp_of(w)
        rows = xp.take(w, self.bags.idx, axis=0)
        coef = _coefficients(self.scale, psw, self.bags, w.dtype)
        if coef is not None:
            rows = rows * coef[:, None]
        return _segment_sum(self.bags, rows)

    def backward(self, gy):
        w, psw = self.inputs[0], self.inputs[1:]
        gw = gpsw = None
        if self.needs_input_grad[0]:
            gw = EmbeddingBagSumGrad(self.bags, self.grad_scale)(gy, *psw)
        if psw and self.needs_input_grad[1]:
            gpsw = EmbeddingBagSampleGrad(self.bags, self.scale)(gy, w)
        return (gw, gpsw) if psw else gw


class EmbeddingBagSumGrad(Function):
    """(gy (B, dim)[, per_sample_weights]) -> the (num, dim) weight gradient: gy[seg_k]
    times s_k c_k, scatter-added into row idx_k."""

    def __init__(self, bags, scale):
        self.bags = bags
        self.scale = scale

    def forward(self, gy, psw=None):
        xp = xp_of(gy)
        rows = xp.take(gy, self.bags.seg, axis=0)
        coef = _coefficients(self.scale, psw, self.bags, gy.dtype)
        if coef is not None:
            rows = rows * coef[:, None]
        gw = xp.zeros((self.bags.num,) + gy.shape[1:], dtype=gy.dtype)
        scatter_add_(gw, self.bags.idx, rows)
        return gw

    def backward(self, ggw):
        gy, psw = self.inputs[0], self.inputs[1:]
        g_gy = g_psw = None
        if self.needs_input_grad[0]:
            g_gy = EmbeddingBagSum(self.bags, self.scale)(ggw, *psw)
        if psw and self.needs_input_grad[1]:
            g_psw = EmbeddingBagSampleGrad(self.bags, self.scale)(gy, ggw)
        return (g_gy, g_psw) if psw else g_gy


class EmbeddingBagSampleGrad(Function):
    """(gy (B, dim), weight) -> the per_sample_weights gradient, of the input's shape:
    s_k <gy[seg_k], weight[idx_k]> at each kept entry, 0 at padding and unused entries."""

    def __init__(self, bags, scale):
        self.bags = bags
        self.scale = scale

    def forward(self, gy, w):
        xp = xp_of(gy, w)
        bags = self.bags
        dots = (xp.take(gy, bags.seg, axis=0) * xp.take(w, bags.idx, axis=0)).sum(axis=1)
        if self.scale is not None:
            dots = dots * self.scale.astype(dots.dtype, copy=False)
        out = xp.zeros(math.prod(bags.shape), dtype=dots.dtype)
        out[bags.pos] = dots
        return out.reshape(bags.shape)

    def backward(self, gc):
        gy, w = self.inputs
        g_gy = g_w = None
        if self.needs_input_grad[0]:
            g_gy = EmbeddingBagSum(self.bags, self.scale)(w, gc)
        if self.needs_input_grad[1]:
            g_w = EmbeddingBagSumGrad(self.bags, self.scale)(gy, gc)
        return g_gy, g_w


def _segment_max_rows(bags, rows):
    """For each bag and feature, the position (into the kept entries) of the first
    largest entry; (B, dim) ints, -1 for empty bags.  The host's kernel table holds a
    ``ufunc.reduceat`` version (``lezero.kernels.host``); the reference pads."""
    xp = xp_of(rows)
    n, dim = rows.shape
    at = xp.full((bags.n_bags, dim), -1, dtype=np.int64)
    if n == 0:
        return at
    starts = xp.cumsum(bags.sizes) - bags.sizes
    full = bags.sizes > 0
    pick = get_backend(rows).kernel("segment_max_rows", _padded_max_rows)
    at[full] = pick(bags, rows, starts, full)
    return at


def _padded_max_rows(bags, rows, starts, full):
    """The reference: a padded (B, longest bag, dim) block, reduced along axis 1."""
    xp = xp_of(rows)
    n, dim = rows.shape
    rank = xp.arange(n) - starts[bags.seg]
    block = xp.full((bags.n_bags, int(bags.sizes.max()), dim), -xp.inf, dtype=rows.dtype)
    block[bags.seg, rank] = rows
    return (block.argmax(axis=1) + starts[:, None])[full]


class EmbeddingBagPick(Function):
    """weight -> out[b, d] = weight[rows[b, d], d] (0 where rows is -1)."""

    def __init__(self, rows, num):
        self.rows = rows
        self.num = num

    def _pick(self, w):
        xp = xp_of(w)
        dim = w.shape[1]
        safe = xp.maximum(self.rows, 0)
        out = w.reshape(-1)[safe * dim + xp.arange(dim)]
        return xp.where(self.rows >= 0, out, xp.zeros((), dtype=w.dtype))

    def forward(self, w):
        return self._pick(w)

    def backward(self, gy):
        return EmbeddingBagMaxGrad(self.rows, self.num)(gy)


class EmbeddingBagMax(EmbeddingBagPick):
    """weight -> the per-feature maximum over each bag (max mode); empty bags give 0.
    The gradient goes to the row that gave each maximum (the first one, on ties)."""

    def __init__(self, bags):
        super().__init__(None, bags.num)
        self.bags = bags

    def forward(self, w):
        xp = xp_of(w)
        idx = self.bags.idx
        entries = _segment_max_rows(self.bags, xp.take(w, idx, axis=0))
        self.rows = entries if idx.size == 0 else \
            xp.where(entries >= 0, idx[xp.maximum(entries, 0)], -1)
        return self._pick(w)


class EmbeddingBagMaxGrad(Function):
    """gy (B, dim) -> the (num, dim) weight gradient of max mode: gy[b, d] added into
    row rows[b, d] (nothing from empty bags).  Its own gradient picks those rows back."""

    def __init__(self, rows, num):
        self.rows = rows
        self.num = num

    def forward(self, gy):
        xp = xp_of(gy)
        dim = gy.shape[1]
        flat = (self.rows * dim + xp.arange(dim)).reshape(-1)
        used = self.rows.reshape(-1) >= 0
        gw = xp.zeros(self.num * dim, dtype=gy.dtype)
        scatter_add_(gw, flat[used], gy.reshape(-1)[used])
        return gw.reshape(self.num, dim)

    def backward(self, ggw):
        return EmbeddingBagPick(self.rows, self.num)(ggw)


@register("embedding", notes="sum/mean/max; 2-D input or 1-D with offsets")
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """The sum, mean or max of each bag of rows of ``weight`` (num_embeddings, dim), as
    ``torch.nn.functional.embedding_bag``; the result has shape (bags, dim).

    ``input``: integer indices, either 2-D (B, N) -- B bags of N -- with ``offsets``
    None, or 1-D with ``offsets`` (1-D, non-decreasing, starting at 0) marking where each
    bag starts; with ``include_last_offset`` the last offset is the end of the last bag
    (entries after it belong to no bag).  ``mode``: "sum", "mean" or "max".
    ``per_sample_weights`` (input's shape, mode "sum" only) scale each entry.
    ``padding_idx``: entries equal to it are left out of their bag (a mean divides by the
    remaining count); an empty bag gives zeros.  ``max_norm``: looked-up rows longer than
    it are first scaled down *in place* in ``weight``.  ``scale_grad_by_freq``: divide
    each row's gradient by how often its index occurs in the bags (sum and mean; this is
    PyTorch's documented rule -- its CPU kernel divides some rows by the wrong count,
    pytorch/pytorch#190063).  ``sparse=True`` is refused: gradients are dense.
    """
    indices, w = check_tables(input, weight)
    num = w.shape[0]
    max_norm, norm_type = check_options(mode, include_last_offset, scale_grad_by_freq,
                                         sparse, max_norm, norm_type)
    padding_idx = check_padding_idx(padding_idx, num, OP)
    check_per_sample_weights(per_sample_weights, mode, indices, w)
    xp = xp_of(w)
    indices = xp.asarray(indices)          # on the weight's device
    check_indices(OP, indices, num, " in input")
    starts, ends = bag_bounds(xp, indices, offsets, include_last_offset)
    bags = make_bags(xp, indices, starts, ends, padding_idx, num)
    if max_norm is not None and indices.size:
        # As in PyTorch: every index of the input is renormalised, padding included.
        renorm_rows_(w, indices.reshape(-1), max_norm, norm_type)

    if mode == "max":
        return EmbeddingBagMax(bags)(weight)
    scale = None
    if mode == "mean":
        scale = 1.0 / xp.maximum(bags.sizes, 1)[bags.seg].astype(w.dtype)
    grad_scale = None
    if scale_grad_by_freq:
        counts = xp.bincount(bags.idx, minlength=num)[bags.idx].astype(w.dtype)
        grad_scale = (1.0 if scale is None else scale) / counts
    inputs = (weight,) if per_sample_weights is None else (weight, per_sample_weights)
    return EmbeddingBagSum(bags, scale, grad_scale)(*inputs)
