"""``nll_loss``: the negative log-likelihood of class indices under log-probabilities.

``cross_entropy(x, y) == nll_loss(log_softmax(x, 1), y)``; the target, its weights,
``ignore_index`` and the weighted 'mean' are shared with cross_entropy
(``class_target``).  The gradient ``NLLLossGrad`` is linear in the upstream gradient,
so the loss differentiates to any order.
"""
from lezero.core import Function
from lezero.functions.common import as_variable, xp_of
from lezero.functions.loss.class_target import (ClassTarget, batched, grad_of_gy, prepare,
                                                reduce_array, scale_of)
from lezero.functions.loss.common import check_reduction
from lezero.functions.registry import register
from lezero.functions.shape import reshape

__all__ = ["nll_loss"]


class NLLLoss(Function):
    """-sum_c q_c x_c per position, x being log-probabilities."""

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, x):
        return reduce_array(-self.target.dot(x), self.reduction, self.target.denom)

    def backward(self, gy):
        return NLLLossGrad(self.target, self.reduction)(gy)


class NLLLossGrad(Function):
    """gx = -scale * q: linear in gy, so its own gradient is a contraction with q."""

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, gy):
        t = self.target
        gx = xp_of(gy).zeros(t.x_shape, dtype=gy.dtype)
        t.add_scaled(gx, -scale_of(gy, self.reduction, t.denom))
        return gx

    def backward(self, ggx):
        products = ggx * as_variable(-self.target.dense())
        return grad_of_gy(products, self.reduction, self.target.denom)


@register("loss")
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of class indices under log-probabilities ``input``, as
    ``torch.nn.functional.nll_loss``: ``-weight[y] * input[n, y]`` per position.

    Shapes, ``weight``, ``ignore_index`` and the weighted 'mean' are as in
    ``cross_entropy``; ``cross_entropy(x, y) == nll_loss(log_softmax(x, 1), y)``.
    """
    op = "nll_loss"
    check_reduction(op, reduction)
    x, t, w, _ = prepare(op, input, target, weight, ignore_index, allow_probs=False)
    if x.ndim == 1:
        xb, tb = batched(input, target, False)
        loss = nll_loss(xb, tb, w, ignore_index, reduction)
        return reshape(loss, ()) if reduction == "none" else loss
    q = ClassTarget(t, x.shape, x.dtype, w, ignore_index, 0.0)
    return NLLLoss(q, reduction)(input)
