"""``cross_entropy``: softmax over the classes and cross entropy in one fused Function.

The loss at a position is ``qsum * logsumexp(x) - q . x`` (``class_target`` explains q),
so the forward needs one log-softmax pass and no log-probability array, and the gradient
``scale * (qsum * softmax(x) - q)`` comes from the saved exponentials without recomputing
them.  ``SoftmaxCrossEntropyGrad`` is itself a Function of (x, gy), so the loss
differentiates twice.
"""
from lezero.core import Function, Variable
from lezero.functions.activation import log_softmax
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
    """Cross entropy of softmax(x) over axis 1 against a constant target.  Backward reads
    the kept exponentials, not x: the logits (often the largest activation of a language
    model) are freed when forward returns, as PyTorch keeps only log_softmax's output.
    Under autocast it computes in float32 from low-precision logits and returns a float32
    loss; it then keeps those logits (half the bytes) and recomputes the exponentials in
    backward, so the gradient is as exact as in float32."""

    save_inputs, reads_outputs = (), False
    float32_output = True       # autocast: a float32 loss (amp.emulate)

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, x):
        e, inv_sum, lse = softmax_stats(x)      # a kernel: one pass per row instead of five
        if self.needs_input_grad[0] and "_amp_float32" in vars(self):
            self.logits = x         # the float32 copy of low logits: amp keeps the original
        elif self.needs_input_grad[0]:
            # softmax = e * inv_sum; the product is left to the backward, where it joins
            # the one multiplication that makes the gradient (a pass over memory saved).
            self.exp, self.inv_sum = e, inv_sum
        loss = self.target.qsum * lse
        loss -= self.target.dot(x)
        return reduce_array(loss, self.reduction, self.target.denom)

    def backward(self, gy):
        if "logits" in vars(self):
            self.exp, self.inv_sum, _ = softmax_stats(self.logits)
        x = self.inputs[0]
        return SoftmaxCrossEntropyGrad(self)(x if isinstance(x, Variable) else x.variable(), gy)


class SoftmaxCrossEntropyGrad(Function):
    """gx = scale * (qsum * softmax(x) - q): a Function of (x, gy), so it has a gradient."""

    def __init__(self, fwd):
        self.target = fwd.target
        self.reduction = fwd.reduction
        self.exp, self.inv_sum = fwd.exp, fwd.inv_sum

    def forward(self, x, gy):                   # x: the graph edge (its data may be gone)
        xp = xp_of(self.exp)
        t = self.target
        scale = scale_of(gy, self.reduction, t.denom)
        gx = self.exp * (xp.expand_dims(scale * t.qsum, 1) * self.inv_sum)
        t.add_scaled(gx, -scale)
        return gx

    def backward(self, ggx):
        x, gy = self.inputs
        t = self.target
        s = SavedSoftmax(self.exp, self.inv_sum)(x)
        qsum = as_variable(xp_of(self.exp).expand_dims(t.qsum, 1))
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


class SavedSoftmax(Function):
    """softmax(x) over axis 1 from the forward's kept exponentials (x's data is gone); its
    gradient is softmax's Jacobian in the output, so the loss differentiates again."""

    save_inputs, reads_outputs = (), True

    def __init__(self, exp, inv_sum):
        self.exp, self.inv_sum = exp, inv_sum

    def forward(self, x):
        return self.exp * self.inv_sum

    def backward(self, gs):
        s = self.outputs[0]()
        return s * (gs - _sum(s * gs, axis=1, keepdims=True))


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
