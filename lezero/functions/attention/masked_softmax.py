"""The masked, scaled softmax at the heart of attention, as two fused Functions.

``MaskedSoftmax(keep, scale, causal)`` computes ``softmax(scale * s)`` over the last
axis, restricted to where ``keep`` (a constant bool array or None) is True and, with
``causal``, to columns <= the row's index in its (L, S) matrix; -inf scores count as
masked and a row with nothing left gives zeros, never NaN.

Its backward is ``MaskedSoftmaxGrad(scale)(y, gy) = scale * y * (gy - sum(gy * y))``,
one call instead of four small operators; the Grad's own backward is written with
LeZero operators, so attention can be differentiated twice.

The array work is ``lezero.kernels.softmax``: float32 NumPy arrays with a causal mask or
none take its Numba kernels (when ``lezero.kernels.enabled`` allows), everything else its
NumPy/CuPy reference.
"""
from lezero.kernels import softmax as softmax_kernels
from lezero.core import Function
from lezero.functions.reduction import sum as _sum

__all__ = ["MaskedSoftmax", "MaskedSoftmaxGrad"]


class MaskedSoftmax(Function):
    """softmax(scale * s) over the last axis where ``keep`` (and ``causal``) allow."""

    save_inputs, reads_outputs = (), True    # backward reads the output, as torch's softmax

    def __init__(self, keep=None, scale=1.0, causal=False):
        self.keep, self.scale, self.causal = keep, scale, causal

    def forward(self, s):
        return softmax_kernels.masked_softmax(s, self.scale, self.causal, self.keep)

    def backward(self, gy):
        return MaskedSoftmaxGrad(self.scale)(self.outputs[0](), gy)


class MaskedSoftmaxGrad(Function):
    """(y, gy) -> scale * y * (gy - sum(gy * y, last axis)), the softmax gradient."""

    def __init__(self, scale):
        self.scale = scale

    def forward(self, y, gy):
        return softmax_kernels.softmax_grad(y, gy, self.scale)
    def backward(self, g):
        # out = c (y * gy - y * sum(gy y)) is bilinear in (y, gy):
        #   d/dgy: c y (g - sum(g y))                 -- this Function again;
        #   d/dy:  c (g (gy - sum(gy y)) - gy sum(g y)).
        y, gy = self.inputs
        gy_grad = MaskedSoftmaxGrad(self.scale)(y, g) if self.needs_input_grad[1] else None
        y_grad = None
        if self.needs_input_grad[0]:
            y_grad = self.scale * (g * (gy - _sum(gy * y, axis=-1, keepdims=True))
                                   - gy * _sum(g * y, axis=-1, keepdims=True))
        return y_grad, gy_grad
