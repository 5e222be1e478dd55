"""Depthwise convolution: ``groups == in_channels`` (MobileNet's 3x3 layers), 1-D and 2-D.

Each output channel reads one input channel, so there is no channel contraction for a
GEMM to speed up: im2col would build a patch matrix for a product of one row per group,
and the general tap loop (``direct``) pays its set-up per row and tap.  The kernels of
``lezero.kernels.depthwise`` pad each plane once into a zero-bordered buffer and sum every
tap without bounds checks; any channel multiplier (``out_channels = m * in_channels``),
stride, padding and dilation.
"""
import math

from lezero.kernels import depthwise as dw_kernels
from lezero.functions.common import xp_of
from lezero.functions.conv.algorithm import Algorithm, output
from lezero.functions.conv.direct import _as_4d, _geo


class Depthwise(Algorithm):
    name = "depthwise"
    summary = "groups == in_channels: each plane padded once, every tap summed in cache"

    def unsupported(self, prob):
        g = prob.geom
        if g.nd > 2 or g.groups != prob.in_channels:
            return "needs a 1-D/2-D convolution with groups == in_channels"
        return None

    def _run(self, kernel, a, b, prob, shape, cache=None):
        xp, g = xp_of(a), prob.geom
        out = output(cache, shape, a.dtype, xp)
        kernel(_as_4d(a, g.nd), _as_4d(b, g.nd), _as_4d(out, g.nd), _geo(g))
        return out

    def forward(self, x, w, prob, cache):
        return self._run(dw_kernels.depthwise_forward, x, w, prob, prob.y_shape, cache)

    def grad_input(self, gy, w, prob, cache):
        return self._run(dw_kernels.depthwise_grad_input, gy, w, prob, prob.x_shape, cache)

    def grad_weight(self, x, gy, prob, cache):
        return self._run(dw_kernels.depthwise_grad_weight, x, gy, prob, prob.w_shape)

    # -- cost model --
    def workspace_bytes(self, prob, op):
        # one padded plane per thread
        g = prob.geom
        return math.prod(p + 2 * q for p, q in zip(g.in_size, g.pad_lo)) * prob.itemsize

    def predict(self, prob, op, reuse=False):
        """Multiply-adds at the kernels' vector rate (rows of three taps are unrolled;
        other widths run one pass per tap, and stride 2 reads every other column), plus
        copying planes into the buffer (the weight gradient copies an input plane per
        output channel) and a fixed cost per plane."""
        g = prob.geom
        fmas = prob.flops() / 2
        rate = MACHINE_DEPTHWISE["fma_per_s"] * (1.0 if g.stride[-1] == 1 else 0.5)
        if g.kernel[-1] != 3:
            rate *= MACHINE_DEPTHWISE["not_unrolled"]
        mult = prob.out_channels // prob.in_channels
        x_copies = mult if op == "grad_weight" else 1
        elements = math.prod(prob.x_shape) * x_copies + math.prod(prob.y_shape)
        planes = prob.batch * prob.out_channels
        return (fmas / rate + elements * MACHINE_DEPTHWISE["element_s"]
                + planes * MACHINE_DEPTHWISE["plane_s"] + MACHINE_DEPTHWISE["call_s"])


# Single-thread constants of the depthwise kernels, measured like ``direct``'s
# (MobileNetV2's 3x3 layers, 112x112 to 7x7, float32).
MACHINE_DEPTHWISE = {"fma_per_s": 7e9, "not_unrolled": 0.3, "element_s": 0.25e-9,
                     "plane_s": 150e-9, "call_s": 20e-6}
