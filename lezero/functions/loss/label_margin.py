"""Margins of class scores against labels: soft_margin_loss, multilabel_soft_margin_loss,
multi_margin_loss, multilabel_margin_loss.

Each follows PyTorch's formula.  The target gets a gradient only where it enters
arithmetically (soft_margin_loss, multilabel_soft_margin_loss; PyTorch refuses one for
soft_margin_loss, LeZero gives the true derivative).  The hinges of multi_margin_loss and
multilabel_margin_loss are ``relu``, whose gradient at 0 is 0 as in PyTorch's kernels
(``z > 0``).
"""
import numpy as np

from lezero.functions.activation import logsigmoid, relu
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.loss.common import check_floats, check_reduction, reduce_loss
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import gather, reshape
from lezero.kernels.scatter import scatter_add_
from lezero.utils.checks import check_array, check_float_array, check_number

__all__ = ["soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "multilabel_margin_loss"]


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
