"""Margin losses on pairs and triplets of embeddings: cosine_embedding_loss,
margin_ranking_loss, triplet_margin_loss, hinge_embedding_loss.

Each follows PyTorch's formula, including how target values other than 1 and -1 are
treated; the choice of branch by the target is a constant mask, so the target gets a
gradient only where it enters arithmetically (margin_ranking_loss).
"""
from lezero.functions.common import as_variable, data_of
from lezero.functions.loss.common import (check_floats, check_reduction,
                                          check_same_shape, reduce_loss)
from lezero.functions.math import clip
from lezero.functions.reduction import norm
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.utils.checks import check_array, check_bool, check_number

__all__ = ["cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
           "hinge_embedding_loss"]

_COS_EPS = 1e-12     # added to each squared magnitude, as PyTorch does


def _hinge(v):
    """max(v, 0) with PyTorch's clamp_min(0) gradient: 1 where v >= 0 (also at v == 0)."""
    return clip(v, 0.0)


def _mask(t, value, dtype):
    return as_variable((data_of(t) == value).astype(dtype))


def _check_target(op, target, shape):
    t = check_array(op, "target", target)
    if t.shape != shape:
        raise ValueError(f"{op}: target must have shape {shape}, got {t.shape}")
    if t.dtype.kind not in "iuf":
        raise TypeError(f"{op}: target must hold numbers (1 or -1), got dtype {t.dtype}")
    return t


@register("loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """As ``torch.nn.functional.cosine_embedding_loss``: ``1 - cos(x1, x2)`` where
    target is 1 and ``max(0, cos(x1, x2) - margin)`` where it is -1 (0 elsewhere).

    Inputs are (N, D) with target (N,), or (D,) with a 0-d target.
    """
    op = "cosine_embedding_loss"
    check_reduction(op, reduction)
    check_floats(op, input1=input1, input2=input2)
    check_same_shape(op, "input1", input1, "input2", input2)
    margin = check_number(op, "margin", margin)
    shape = data_of(input1).shape
    if len(shape) not in (1, 2):
        raise ValueError(f"{op}: inputs must be (N, D) or (D,), got shape {shape}")
    _check_target(op, target, shape[:-1])
    x1, x2 = as_variable(input1), as_variable(input2)
    axis = x1.ndim - 1
    dot = _sum(x1 * x2, axis=axis)
    mag = (_sum(x1 * x1, axis=axis) + _COS_EPS) * (_sum(x2 * x2, axis=axis) + _COS_EPS)
    cos = dot / mag ** 0.5
    dtype = x1.dtype
    loss = (1 - cos) * _mask(target, 1, dtype) + _hinge(cos - margin) * _mask(target, -1, dtype)
    return reduce_loss(loss, reduction)


@register("loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """As ``torch.nn.functional.margin_ranking_loss``:
    ``max(0, -target * (input1 - input2) + margin)``; all three have one shape."""
    op = "margin_ranking_loss"
    check_reduction(op, reduction)
    check_floats(op, input1=input1, input2=input2, target=target)
    check_same_shape(op, "input1", input1, "input2", input2)
    check_same_shape(op, "input1", input1, "target", target)
    margin = check_number(op, "margin", margin)
    x1, x2, t = as_variable(input1), as_variable(input2), as_variable(target)
    return reduce_loss(_hinge(-t * (x1 - x2) + margin), reduction)


def _pairwise_distance(a, b, p, eps):
    """||a - b + eps||_p over the last axis (PyTorch's pairwise_distance)."""
    return norm(a - b + eps, p, axis=-1)


@register("loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction="mean"):
    """As ``torch.nn.functional.triplet_margin_loss``:
    ``max(0, d(a, p) - d(a, n) + margin)`` with ``d(x, y) = ||x - y + eps||_p`` over the
    last axis.  ``swap`` uses ``min(d(a, n), d(p, n))`` as the negative distance.
    Inputs are (N, D) or (D,).
    """
    op = "triplet_margin_loss"
    check_reduction(op, reduction)
    check_floats(op, anchor=anchor, positive=positive, negative=negative)
    check_same_shape(op, "anchor", anchor, "positive", positive)
    check_same_shape(op, "anchor", anchor, "negative", negative)
    shape = data_of(anchor).shape
    if len(shape) not in (1, 2):
        raise ValueError(f"{op}: inputs must be (N, D) or (D,), got shape {shape}")
    margin = check_number(op, "margin", margin, 0.0, low_open=True)
    p = check_number(op, "p", p, 0.0, low_open=True)
    eps = check_number(op, "eps", eps, 0.0)
    swap = check_bool(op, "swap", swap)
    a, pos, neg = as_variable(anchor), as_variable(positive), as_variable(negative)
    d_pos = _pairwise_distance(a, pos, p, eps)
    d_neg = _pairwise_distance(a, neg, p, eps)
    if swap:
        d_swap = _pairwise_distance(pos, neg, p, eps)
        closer = as_variable((d_swap.data < d_neg.data).astype(d_neg.dtype))
        d_neg = d_neg * (1 - closer) + d_swap * closer
    return reduce_loss(_hinge(d_pos - d_neg + margin), reduction)


@register("loss")
def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    """As ``torch.nn.functional.hinge_embedding_loss``: ``input`` where target is 1,
    ``max(0, margin - input)`` where it is -1 (PyTorch adds both terms for other values)."""
    op = "hinge_embedding_loss"
    check_reduction(op, reduction)
    check_floats(op, input=input)
    _check_target(op, target, data_of(input).shape)
    margin = check_number(op, "margin", margin)
    x = as_variable(input)
    t = data_of(target)
    not_pos = as_variable((t != 1).astype(x.dtype))
    not_neg = as_variable((t != -1).astype(x.dtype))
    return reduce_loss(_hinge(margin - x) * not_pos + x * not_neg, reduction)
