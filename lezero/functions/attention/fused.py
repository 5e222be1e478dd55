"""The fused path of ``scaled_dot_product_attention``: every head's attention in one call
of ``lezero.kernels.attention`` (float32 NumPy operands, no mask but the causal one, no
dropout), split over threads by heads.

``FusedAttention`` keeps the probabilities for its backward, as the plain path does.
Its first-order gradient (``backward_arrays``) comes from the kernel; ``backward``, which
``create_graph`` calls, is written with LeZero operators instead (the plain path's
formulas), so attention can still be differentiated twice.
"""
from lezero.core import Function
from lezero.kernels import attention as attention_kernels
from lezero.functions.attention.masked_softmax import MaskedSoftmax, MaskedSoftmaxGrad
from lezero.functions.linalg import matmul
from lezero.functions.shape import swapaxes

__all__ = ["FusedAttention", "fits"]


def fits(q, k, v, mask_add, keep, dropout_p):
    """Whether the fused path takes these raw operands and options (see
    ``lezero.kernels.attention``: ``takes`` and ``small_heads``)."""
    return (mask_add is None and keep is None and dropout_p == 0
            and attention_kernels.takes(q, k, v) and attention_kernels.small_heads(q, k, v))


class FusedAttention(Function):
    """softmax(scale q k^T [causal]) v over every (batch, head) of q (..., L, E),
    k (..., S, E), v (..., S, Ev) with equal batch dims."""

    def __init__(self, scale, causal):
        self.scale, self.causal = float(scale), bool(causal)

    def forward(self, q, k, v):
        if attention_kernels.takes(q, k, v):
            out, self.p = attention_kernels.attention_forward(q, k, v, self.scale, self.causal)
            self.kernel = True
        else:
            # what the kernel does not take -- autocast's lower precision, a graph replayed
            # on other arrays -- runs the NumPy/CuPy reference, forward and backward
            out, self.p = attention_kernels.attention_forward_ref(q, k, v, self.scale,
                                                                  self.causal)
            self.kernel = False
        return out

    def backward_arrays(self, go):
        """First order: the kernel's gradients (or its reference's)."""
        q, k, v = (x.data for x in self.inputs)
        grads = (attention_kernels.attention_backward if self.kernel
                 else attention_kernels.attention_backward_ref)
        return grads(q, k, v, self.p, go, self.scale)

    def backward(self, go):
        """The plain path's formulas with LeZero operators (differentiable again)."""
        q, k, v = self.inputs
        p = MaskedSoftmax(None, self.scale, self.causal)(matmul(q, swapaxes(k, -1, -2)))
        ds = MaskedSoftmaxGrad(self.scale)(p, matmul(go, swapaxes(v, -1, -2)))
        return matmul(ds, k), matmul(swapaxes(ds, -1, -2), q), matmul(swapaxes(p, -1, -2), go)
