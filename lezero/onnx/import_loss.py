"""ONNX training losses run with LeZero: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (registered into ``import_ops.IMPORT_OPS``).

Both take scores of shape (N, C, d1, ...) and integer targets of shape (N, d1, ...), an
optional per-class weight, ``ignore_index`` and ``reduction`` ('none', 'sum', 'mean').
As ONNX defines it, 'mean' divides by the summed weights of the targets that are not
ignored (their count without a weight).  Built from ``lezero.functions``, so the loss
back-propagates into the scores and into a weight that is a Parameter.
"""
import numpy as np

import lezero.functions as F
from lezero.core import Variable
from lezero.onnx.import_ops import arr, is_var, op


def _as_var(x):
    return x if is_var(x) else Variable(np.asarray(x), requires_grad=False)


def _target_weights(target, weight, ignore_index, n_classes, dtype):
    """Per-target weights (Variable or array, ``dtype``) and the class each target picks
    (ignored targets point at class 0 and weigh 0)."""
    valid = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
    if ((target[valid] < 0) | (target[valid] >= n_classes)).any():
        raise IndexError(f"a target lies outside [0, {n_classes}) and is not ignore_index "
                         f"({ignore_index})")
    safe = np.where(valid, target, 0)
    if weight is None:
        return valid.astype(dtype), safe
    if is_var(weight):
        return F.take(weight, safe, axis=0) * valid.astype(dtype), safe
    return (arr(weight)[safe] * valid).astype(dtype), safe


def nll_loss(log_prob, target, weight, ignore_index, reduction):
    """ONNX NegativeLogLikelihoodLoss of ``log_prob`` (N, C, ...) at ``target``."""
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"reduction must be 'none', 'sum' or 'mean', got {reduction!r}")
    x, target = _as_var(log_prob), arr(target)
    if x.ndim < 2 or target.shape != (x.shape[0],) + x.shape[2:]:
        raise ValueError(f"scores of shape {x.shape} (N, C, ...) need targets of shape "
                         f"{(x.shape[0],) + x.shape[2:]}, got {target.shape}")
    if target.dtype.kind not in "iu":
        raise ValueError(f"targets must be integers, got {target.dtype}")
    w, safe = _target_weights(target.astype(np.int64), weight, ignore_index, x.shape[1],
                              x.dtype)
    picked = F.reshape(F.gather(x, 1, safe[:, None]), target.shape)
    loss = -picked * w
    if reduction == "none":
        return loss
    total = F.sum(loss)
    if reduction == "sum":
        return total
    return total / (F.sum(w) if is_var(w) else np.asarray(w.sum(), dtype=x.dtype))


def _loss_args(node, args):
    weight = args[2] if len(args) > 2 else None
    return weight, node.attrs.get("ignore_index"), node.attrs.get("reduction", "mean")


@op("NegativeLogLikelihoodLoss")
def _nll(node, args, module):
    return nll_loss(args[0], args[1], *_loss_args(node, args))


@op("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(node, args, module):
    scores = _as_var(args[0])
    if scores.ndim < 2:
        raise ValueError(f"scores must be (N, C, ...), got shape {scores.shape}")
    log_prob = F.log_softmax(scores, axis=1)
    loss = nll_loss(log_prob, args[1], *_loss_args(node, args))
    return (loss, log_prob) if len(node.outputs) > 1 else loss
