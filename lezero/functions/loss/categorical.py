"""``cross_entropy``: softmax over the classes and cross entropy in one fused Function.

The loss at a position is ``qsum * logsumexp(x) - q . x`` (``class_target`` explains q),
so the forward needs one log-softmax pass and no log-probability array, and the gradient
``scale * (qsum * softmax(x) - q)`` comes from the saved exponentials without recomputing
them.  ``SoftmaxCrossEntropyGrad`` is itself a Function of (x, gy), so the loss
differentiates twice.
"""
from lezero.core import Function, Variable
from lezero.functions.activation import log_softmax, softmax
from lezero.functions.common import as_variable, xp_of
from lezero.functions.loss.class_target import (ClassTarget, ProbTarget, batched, grad_of_gy,
                                                prepare, reduce_array, scale_of)
from lezero.functions.loss.common import check_reduction
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.kernels.softmax import softmax_stats
from lezero.functions.shape import reshape
from lezero.utils.checks import check_number

__all__ = ["cross_entropy"]


class SoftmaxCrossEntropy(Function):
    """Cross entropy of softmax(x) over axis 1 against a constant target."""

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, x):
        e, inv_sum, lse = softmax_stats(x)      # a kernel: one pass per row instead of five
        if self.needs_input_grad[0]:
            # softmax = e * inv_sum; the product is left to the backward, where it joins
            # the one multiplication that makes the gradient (a pass over memory saved).
            self.exp, self.inv_sum = e, inv_sum
        loss = self.target.qsum * lse
        loss -= self.target.dot(x)
        return reduce_array(loss, self.reduction, self.target.denom)

    def backward(self, gy):
        return SoftmaxCrossEntropyGrad(self)(self.inputs[0], gy)


class SoftmaxCrossEntropyGrad(Function):
    """gx = scale * (qsum * softmax(x) - q): a Function of (x, gy), so it has a gradient."""

    def __init__(self, fwd):
        self.target = fwd.target
        self.reduction = fwd.reduction
        self.exp, self.inv_sum = fwd.exp, fwd.inv_sum

    def forward(self, x, gy):
        xp = xp_of(x)
        t = self.target
        scale = scale_of(gy, self.reduction, t.denom)
        gx = self.exp * (xp.expand_dims(scale * t.qsum, 1) * self.inv_sum)
        t.add_scaled(gx, -scale)
        return gx

    def backward(self, ggx):
        x, gy = self.inputs
        t = self.target
        s = softmax(x, axis=1)
        qsum = as_variable(xp_of(x.data).expand_dims(t.qsum, 1))
        g_x = g_gy = None
        if self.needs_input_grad[0]:
            scale = gy if self.reduction != "mean" else gy / float(t.denom)
            if self.reduction == "none":
                scale = reshape(scale, qsum.shape)
            v = ggx * (scale * qsum)
            g_x = s * (v - _sum(s * v, axis=1, keepdims=True))    # softmax's Jacobian
        if self.needs_input_grad[1]:
            g_gy = grad_of_gy(ggx * (s * qsum - as_variable(t.dense())), self.reduction, t.denom)
        return g_x, g_gy


@register("loss", notes="fused softmax + cross entropy; class-index or probability targets")
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy between softmax(input) over axis 1 and ``target``, as
    ``torch.nn.functional.cross_entropy``.

    ``input``: logits (C,), (N, C) or (N, C, d1, ...).  ``target``: class indices of shape
    (), (N,) or (N, d1, ...), or class probabilities of the input's shape.  ``weight``: one
    rescaling weight per class.  Targets equal to ``ignore_index`` contribute nothing and
    are left out of the 'mean' denominator, which with ``weight`` is the summed weight of
    the targets (PyTorch's weighted mean).  ``label_smoothing`` mixes the target with the
    uniform distribution.  The deprecated ``size_average``/``reduce`` are not supported.
    """
    op = "cross_entropy"
    check_reduction(op, reduction)
    smoothing = check_number(op, "label_smoothing", label_smoothing, 0.0, 1.0)
    x, t, w, probs = prepare(op, input, target, weight, ignore_index, allow_probs=True)
    if x.ndim == 1:
        xb, tb = batched(input, target, probs)
        loss = cross_entropy(xb, tb, w, ignore_index, reduction, label_smoothing)
        return reshape(loss, ()) if reduction == "none" else loss
    if probs and isinstance(target, Variable) and target.requires_grad:
        return _cross_entropy_composite(input, target, w, reduction, smoothing)
    if probs:
        q = ProbTarget(t, w, smoothing)
    else:
        q = ClassTarget(t, x.shape, x.dtype, w, ignore_index, smoothing)
    return SoftmaxCrossEntropy(q, reduction)(input)


def _cross_entropy_composite(x, t, w, reduction, smoothing):
    """Probability targets that need a gradient: the same loss from differentiable ops."""
    n_classes = t.shape[1]
    if smoothing:
        t = t * (1 - smoothing) + smoothing / n_classes
    if w is not None:
        t = t * as_variable(w.reshape((1, n_classes) + (1,) * (t.ndim - 2)))
    loss = -_sum(t * log_softmax(x, axis=1), axis=1)
    if reduction == "none":
        return loss
    total = _sum(loss)
    return total if reduction == "sum" else total / loss.size
