"""Losses between probability distributions: binary_cross_entropy,
binary_cross_entropy_with_logits and kl_div."""
import numpy as np

from lezero.core import Function
from lezero.functions.activation import logsigmoid
from lezero.functions.common import xp_of
from lezero.functions.loss.common import check_pair, reduce_loss
from lezero.functions.math import clip, exp, log
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.utils.checks import check_bool, check_float_array

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]


def _check_broadcast_weight(op, name, weight, shape):
    if weight is None:
        return
    w = check_float_array(op, name, weight)
    try:
        ok = np.broadcast_shapes(w.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: {name} of shape {w.shape} does not broadcast to the input's "
                         f"shape {shape}")


class BinaryCrossEntropy(Function):
    """-(t log x + (1 - t) log(1 - x)) elementwise, each log clamped at -100 (PyTorch)."""

    def forward(self, x, t):
        xp = xp_of(x)
        with np.errstate(divide="ignore"):
            log_x = xp.maximum(xp.log(x), -100)
            log_1mx = xp.maximum(xp.log1p(-x), -100)
        return -(t * log_x + (1 - t) * log_1mx)

    def backward(self, gy):
        x, t = self.inputs
        gx = gt = None
        if self.needs_input_grad[0]:
            # PyTorch's form: finite (about 1e12) even where x is exactly 0 or 1.
            gx = gy * (x - t) / clip(x * (1 - x), 1e-12)
        if self.needs_input_grad[1]:
            gt = gy * (log(1 - x) - log(x))
        return gx, gt


@register("loss")
def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """Binary cross entropy between probabilities ``input`` (in [0, 1]) and ``target``, as
    ``torch.nn.functional.binary_cross_entropy``; logs are clamped at -100, so an input of
    exactly 0 or 1 gives a finite loss.  ``weight`` broadcasts to the input's shape."""
    op = "binary_cross_entropy"
    input, target = check_pair(op, input, target, reduction)
    x = input.data
    _check_broadcast_weight(op, "weight", weight, x.shape)
    if x.size and bool(((x < 0) | (x > 1)).any()):
        raise ValueError(f"{op}: input values must lie in [0, 1] (probabilities), got values "
                         f"in [{float(x.min())}, {float(x.max())}]")
    loss = BinaryCrossEntropy()(input, target)
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction)


@register("loss")
def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """Binary cross entropy of sigmoid(input) against ``target``, computed from the logits
    without overflow (exact for |input| = 1000), as
    ``torch.nn.functional.binary_cross_entropy_with_logits``.

    ``pos_weight`` (broadcast along the last axis, one per class) weighs the positive term;
    ``weight`` broadcasts to the input's shape.
    """
    op = "binary_cross_entropy_with_logits"
    x, t = check_pair(op, input, target, reduction)
    _check_broadcast_weight(op, "weight", weight, x.shape)
    _check_broadcast_weight(op, "pos_weight", pos_weight, x.shape)
    # -[t log s(x) + (1 - t) log(1 - s(x))] = (1 - t) x - log s(x), as log(1 - s(x)) =
    # log s(x) - x; pos_weight scales the t log s(x) term.  logsigmoid is exact for any x.
    log_weight = 1 if pos_weight is None else (pos_weight - 1) * t + 1
    loss = (1 - t) * x - log_weight * logsigmoid(x)
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction)


class XLogX(Function):
    """x log x, taken as 0 at x = 0."""

    def forward(self, x):
        xp = xp_of(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.where(x == 0, xp.zeros((), x.dtype), x * xp.log(x))

    def backward(self, gy):
        return gy * (log(self.inputs[0]) + 1)


@register("loss")
def kl_div(input, target, reduction="mean", log_target=False):
    """Kullback-Leibler divergence, as ``torch.nn.functional.kl_div``: ``input`` holds
    log-probabilities; ``target`` probabilities (or log-probabilities if ``log_target``).

    Pointwise ``target * (log(target) - input)`` (0 where target is 0).  Reductions:
    'mean' divides by the number of elements, 'batchmean' by the batch size (the true KL
    divergence per sample), 'sum', 'none'.
    """
    op = "kl_div"
    x, t = check_pair(op, input, target, reduction, ("none", "batchmean", "mean", "sum"))
    log_target = check_bool(op, "log_target", log_target)
    if log_target:
        loss = exp(t) * (t - x)
    else:
        loss = XLogX()(t) - t * x
    if reduction == "batchmean":
        total = _sum(loss)
        return total / x.shape[0] if x.ndim else total
    return reduce_loss(loss, reduction)
