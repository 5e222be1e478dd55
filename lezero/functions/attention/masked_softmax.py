"""The masked, scaled softmax at the heart of attention, as two fused Functions.

``MaskedSoftmax(keep, scale, causal)`` computes ``softmax(scale * s)`` over the last
axis, restricted to where ``keep`` (a constant bool array or None) is True and, with
``causal``, to columns <= the row's index in its (L, S) matrix; -inf scores count as
masked and a row with nothing left gives zeros, never NaN.

Its backward is ``MaskedSoftmaxGrad(scale)(y, gy) = scale * y * (gy - sum(gy * y))``,
one call instead of four small operators; the Grad's own backward is written with
LeZero operators, so attention can be differentiated twice.

Float32 NumPy arrays with a causal mask or none take the Numba kernels in
``lezero.kernels.softmax`` (when ``lezero.kernels.enabled`` allows); everything else
takes the NumPy/CuPy path below, which is also the kernels' test reference.
"""
import numpy as np

from lezero import kernels
from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.reduction import sum as _sum

__all__ = ["MaskedSoftmax", "MaskedSoftmaxGrad"]


def _use_kernel(*arrays):
    return all(a.dtype == np.float32 for a in arrays) and kernels.enabled(*arrays)


class MaskedSoftmax(Function):
    """softmax(scale * s) over the last axis where ``keep`` (and ``causal``) allow."""

    def __init__(self, keep=None, scale=1.0, causal=False):
        self.keep, self.scale, self.causal = keep, scale, causal

    def forward(self, s):
        if self.keep is None and s.ndim >= 2 and _use_kernel(s):
            from lezero.kernels.softmax import softmax_forward
            return softmax_forward(s, self.scale, self.causal)
        xp = xp_of(s)
        if self.scale != 1:
            s = s * s.dtype.type(self.scale)
        keep = self.keep
        if self.causal:
            tril = xp.tril(xp.ones(s.shape[-2:], dtype=bool))
            keep = tril if keep is None else keep & tril
        if keep is not None:
            s = xp.where(keep, s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        e = xp.exp(s - xp.where(xp.isfinite(m), m, 0))
        d = e.sum(axis=-1, keepdims=True)
        return e / xp.where(d == 0, 1, d)

    def backward(self, gy):
        return MaskedSoftmaxGrad(self.scale)(self.outputs[0](), gy)


class MaskedSoftmaxGrad(Function):
    """(y, gy) -> scale * y * (gy - sum(gy * y, last axis)), the softmax gradient."""

    def __init__(self, scale):
        self.scale = scale

    def forward(self, y, gy):
        if _use_kernel(y, gy):
            from lezero.kernels.softmax import softmax_backward
            return softmax_backward(y, gy, self.scale)
        dot = (gy * y).sum(axis=-1, keepdims=True)
        out = y * (gy - dot)
        return out * out.dtype.type(self.scale) if self.scale != 1 else out

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
