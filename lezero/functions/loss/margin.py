"""Margin and embedding losses: cosine_embedding_loss, margin_ranking_loss,
triplet_margin_loss, hinge_embedding_loss; and the classification margins
soft_margin_loss, multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss.

Each follows PyTorch's formula, including how target values other than 1 and -1 are
treated; the choice of branch by the target is a constant mask, so the target gets a
gradient only where it enters arithmetically (margin_ranking_loss, soft_margin_loss,
multilabel_soft_margin_loss; PyTorch refuses one for soft_margin_loss, LeZero gives the
true derivative).  The hinges of multi_margin_loss and multilabel_margin_loss are
``relu``, whose gradient at 0 is 0 as in PyTorch's kernels (``z > 0``).
"""
import numpy as np

from lezero.functions.activation import logsigmoid, relu
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.loss.common import (check_floats, check_reduction,
                                          check_same_shape, reduce_loss)
from lezero.functions.math import clip
from lezero.functions.reduction import norm
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import gather, reshape
from lezero.kernels.scatter import scatter_add_
from lezero.utils.checks import check_array, check_bool, check_float_array, check_number

__all__ = ["cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
           "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "multi_margin_loss", "multilabel_margin_loss"]

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



# ----- classification margins ----------------------------------------------------------

def _check_ndim(op, x, allowed):
    """Raise ValueError unless the input has one of the ``allowed`` numbers of dims."""
    if x.ndim not in allowed:
        shapes = {1: "(C,)", 2: "(N, C)"}
        expected = " or ".join(shapes.get(n, f"{n}-D") for n in allowed)
        raise ValueError(f"{op}: input must be {expected}, got shape {x.shape}")


def _broadcasts_to(shape, target_shape):
    """Whether an array of ``shape`` broadcasts to ``target_shape`` without growing it."""
    try:
        return np.broadcast_shapes(shape, target_shape) == target_shape
    except ValueError:
        return False


def _label_target(op, input, target):
    """A target of labels (1 / -1, or 0 / 1) that broadcasts to the input's shape, as a
    Variable in the input's dtype: a float target must share the input's dtype and is
    differentiated like any operand; an integer or boolean one is a constant."""
    x = data_of(input)
    t = check_array(op, "target", target)
    if t.dtype.kind == "f":
        check_floats(op, input=input, target=target)
        y = as_variable(target)
    elif t.dtype.kind in "iub":
        y = as_variable(t.astype(x.dtype))
    else:
        raise TypeError(f"{op}: target must hold numbers, got dtype {t.dtype}")
    if not _broadcasts_to(t.shape, x.shape):
        raise ValueError(f"{op}: target of shape {t.shape} does not broadcast to the "
                         f"input's shape {x.shape}")
    return y


def _class_indices(op, target, batch_shape, n_classes, low=0):
    """An integer target in [low, n_classes) of one of the shapes in ``batch_shape``."""
    t = check_array(op, "target", target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold integer class indices, got dtype {t.dtype}")
    if t.shape not in batch_shape:
        expected = " or ".join(map(str, batch_shape))
        raise ValueError(f"{op}: target must have shape {expected}, got {t.shape}")
    if t.size and (int(t.min()) < low or int(t.max()) >= n_classes):
        raise ValueError(f"{op}: target values must be in [{low}, {n_classes}) for an input "
                         f"with {n_classes} classes, got values in "
                         f"[{int(t.min())}, {int(t.max())}]")
    return t


@register("loss")
def soft_margin_loss(input, target, reduction="mean"):
    """As ``torch.nn.functional.soft_margin_loss``: ``log(1 + exp(-target * input))``
    elementwise (computed as ``-logsigmoid(target * input)``, finite for any magnitude),
    then reduced.  ``target`` (labels 1 / -1) broadcasts to the input's shape."""
    op = "soft_margin_loss"
    check_reduction(op, reduction)
    check_float_array(op, "input", input)
    y = _label_target(op, input, target)
    return reduce_loss(-logsigmoid(y * as_variable(input)), reduction)


@register("loss")
def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):
    """As ``torch.nn.functional.multilabel_soft_margin_loss``: the binary cross entropy of
    the logits ``input`` against 0 / 1 labels ``target``, times ``weight`` when given,
    averaged over the last (class) axis, then reduced.

    ``input`` is (N, C), (C,) or any shape with classes last; ``target`` and ``weight``
    (e.g. one weight per class, (C,)) broadcast to its shape.  'none' gives one loss per
    sample: the input's shape without its last axis.
    """
    op = "multilabel_soft_margin_loss"
    check_reduction(op, reduction)
    x_arr = check_float_array(op, "input", input)
    if x_arr.ndim == 0:
        raise ValueError(f"{op}: input must have a class axis (at least 1-D), got shape ()")
    y = _label_target(op, input, target)
    x = as_variable(input)
    loss = -(y * logsigmoid(x) + (1 - y) * logsigmoid(-x))
    if weight is not None:
        check_floats(op, input=input, weight=weight)
        if not _broadcasts_to(data_of(weight).shape, x_arr.shape):
            raise ValueError(f"{op}: weight of shape {data_of(weight).shape} does not "
                             f"broadcast to the input's shape {x_arr.shape}")
        loss = loss * as_variable(weight)
    return reduce_loss(_sum(loss, axis=-1) / x_arr.shape[-1], reduction)


def _check_p(op, p):
    """PyTorch's p of the multi-class hinge: 1 or 2 (an int or a float equal to one)."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: p must be 1 or 2, got {type(p).__name__}")
    if p not in (1, 2):
        raise ValueError(f"{op}: p must be 1 or 2 (only these are supported), got {p}")
    return int(p)


@register("loss")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction="mean"):
    """As ``torch.nn.functional.multi_margin_loss``, the multi-class hinge: per sample
    ``sum over i != y of weight[y] * max(0, margin - input[y] + input[i]) ** p / C``.

    ``input`` is (N, C) with class indices ``target`` (N,), or unbatched (C,) with a 0-d
    (or (1,)) target; ``p`` is 1 or 2; ``weight`` (C,) rescales each target class and, as
    in PyTorch, is a constant (no gradient).
    """
    op = "multi_margin_loss"
    check_reduction(op, reduction)
    x_arr = check_float_array(op, "input", input)
    _check_ndim(op, x_arr, (1, 2))
    p = _check_p(op, p)
    margin = check_number(op, "margin", margin)
    n_classes = x_arr.shape[-1]
    batch_shape = [(), (1,)] if x_arr.ndim == 1 else [x_arr.shape[:1]]
    t = _class_indices(op, target, batch_shape, n_classes)
    if weight is not None:
        w = check_float_array(op, "weight", weight)
        if w.shape != (n_classes,):
            raise ValueError(f"{op}: weight must have shape ({n_classes},) (one per class), "
                             f"got {w.shape}")
    xp = xp_of(x_arr)
    labels = t.reshape(-1, 1)                                       # (N, 1)
    x = reshape(as_variable(input), (labels.shape[0], n_classes))      # (N, C)
    z = margin - gather(x, 1, labels) + x
    hinge = relu(z)
    if p == 2:
        hinge = hinge * hinge
    scale = (xp.arange(n_classes) != labels).astype(x_arr.dtype)    # leave out i == y
    if weight is not None:
        scale = scale * w.astype(x_arr.dtype)[labels]
    loss = _sum(hinge * as_variable(scale), axis=1) / n_classes
    return reduce_loss(reshape(loss, t.shape), reduction)


@register("loss")
def multilabel_margin_loss(input, target, reduction="mean"):
    """As ``torch.nn.functional.multilabel_margin_loss``: per sample
    ``sum over listed j, unlisted i of max(0, 1 - (input[j] - input[i])) / C``.

    ``target`` has the input's shape, (N, C) or (C,), and lists each sample's classes by
    index from the front, padded with -1: the entries before the first -1 count (a class
    listed twice counts twice), those after it are ignored but must still lie in
    [-1, C).  A sample with no classes listed has loss 0.
    """
    op = "multilabel_margin_loss"
    check_reduction(op, reduction)
    x_arr = check_float_array(op, "input", input)
    _check_ndim(op, x_arr, (1, 2))
    n_classes = x_arr.shape[-1]
    t = _class_indices(op, target, [x_arr.shape], n_classes, low=-1)
    xp = xp_of(x_arr)
    labels = t.reshape(-1, n_classes)
    n = labels.shape[0]
    listed = xp.cumprod(labels != -1, axis=1) > 0       # before the first -1
    # count[s, c]: how often sample s lists class c (unlisted entries go to column C)
    count = xp.zeros((n, n_classes + 1), dtype=x_arr.dtype)
    rows = xp.broadcast_to(xp.arange(n)[:, None], labels.shape)
    scatter_add_(count, (rows, xp.where(listed, labels, n_classes)), 1)
    count = count[:, :n_classes]
    unlisted = (count == 0).astype(x_arr.dtype)
    pair_weight = count[:, :, None] * unlisted[:, None, :]     # (N, listed j, unlisted i)
    x = reshape(as_variable(input), (n, n_classes))
    z = 1 - reshape(x, (n, n_classes, 1)) + reshape(x, (n, 1, n_classes))
    loss = _sum(relu(z) * as_variable(pair_weight), axis=(1, 2)) / n_classes
    return reduce_loss(reshape(loss, x_arr.shape[:-1]), reduction)
