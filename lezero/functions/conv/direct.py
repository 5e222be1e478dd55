"""Direct convolution: no patch matrix.

* pointwise (1x1 kernels, any dims, stride, padding, groups): the convolution *is* a GEMM
  on the (strided) input, ``y[n] = W @ x[n]``.
* otherwise (1-D and 2-D): a loop over the kernel taps (``lezero.kernels.conv_direct``),
  each output plane summed in a buffer that stays in cache.  It wins where the GEMM of
  im2col would be tiny: few channels (LeNet), depthwise layers.
"""
import math

from lezero.kernels import conv_direct as direct_kernels
from lezero.functions.common import xp_of
from lezero.functions.conv.algorithm import (Algorithm, copy_window, output, padded_input, strided,
                                             window_extent)
from lezero.functions.conv.machine import gemm_seconds, stream_seconds
from lezero.runtime import policy
from lezero.runtime.blas import matmul as blas_matmul, matmul_nd


def _as_4d(a, nd):
    """1-D arrays (N, C, L) as 2-D ones (N, C, 1, L)."""
    return a if nd == 2 else a.reshape(a.shape[:2] + (1,) + a.shape[2:])


def _geo(g):
    """(kh, kw, sh, sw, ph, pw, dh, dw) of a 1-D or 2-D geometry."""
    k, s, p, d = g.kernel, g.stride, g.pad_lo, g.dilation
    if g.nd == 1:
        return (1, k[0], 1, s[0], 0, p[0], 1, d[0])
    return (k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1])


def _hw(size):
    """A 1-D or 2-D spatial size as (height, width)."""
    return (1,) * (2 - len(size)) + tuple(size)


def _unpad(ge, prob, xp):
    """Gradient on the window extent -> gradient of the unpadded input."""
    g = prob.geom
    if tuple(ge.shape[2:]) == g.in_size and not any(g.pad_lo):
        return ge
    gx = xp.zeros(prob.x_shape, dtype=ge.dtype)
    return copy_window(ge, gx, tuple(-p for p in g.pad_lo))


class Direct(Algorithm):
    name = "direct"
    summary = "1x1: a GEMM on the input itself; else a loop over the kernel taps"

    @staticmethod
    def _pointwise(prob):
        return prob.geom.kernel_volume == 1

    def unsupported(self, prob):
        if self._pointwise(prob) or prob.geom.nd <= 2:
            return None
        return "needs a 1x1 kernel or a 1-D/2-D convolution"

    # -- pointwise --
    @staticmethod
    def _inside(g):
        """Whether the output grid lies inside the unpadded input: then the strided
        input is one slice of ``x`` (a view at stride 1, one copy otherwise)."""
        return not any(g.pad_lo) and all(e <= n for e, n in zip(window_extent(g), g.in_size))

    def _sampled(self, x, prob):
        """The input at the output grid, as (N, G, C/G, L)."""
        xp, g = xp_of(x), prob.geom
        xe = x if self._inside(g) else padded_input(x, g, xp)
        if all(s == 1 for s in g.stride) and xe.shape[2:] == g.out_size:
            xs = xe
        else:
            xs = xp.ascontiguousarray(xe[(Ellipsis,) + strided(g)])
        return xs.reshape(prob.batch, g.groups, -1, g.out_volume)

    def product_flops(self, prob):
        # the pointwise case: one (M, C/G) @ (C/G, L) product per sample and group
        g = prob.geom
        return 2.0 * prob.out_channels * prob.in_channels * g.out_volume / g.groups ** 2 \
            if self._pointwise(prob) else 0

    def forward(self, x, w, prob, cache):
        xp, G = xp_of(x), prob.geom.groups
        if not self._pointwise(prob):
            return self._taps(direct_kernels.direct_forward, x, w, prob, prob.y_shape,
                              cache=cache)
        xs = self._sampled(x, prob)
        if self._by_columns(prob):
            return _columns_product(xp, w, xs, prob, cache)
        y = output(cache, prob.y_shape, x.dtype, xp)
        matmul_nd(xp, w.reshape(G, w.shape[0] // G, -1), xs, out=y.reshape(xs.shape[:2] + (
            w.shape[0] // G, prob.geom.out_volume)))
        return y

    @staticmethod
    def _by_columns(prob):
        """Whether the batch's pointwise products run as one product over all its columns:
        one group, and maps of fewer than ``policy.pointwise_columns_below`` positions,
        where a product per sample is too narrow for BLAS to run at its rate."""
        return (prob.geom.groups == 1 and prob.batch > 1
                and prob.geom.out_volume < policy.pointwise_columns_below)

    def grad_input(self, gy, w, prob, cache):
        xp, g = xp_of(gy), prob.geom
        if not self._pointwise(prob):
            return self._taps(direct_kernels.direct_grad_input, gy, w, prob, prob.x_shape,
                              cache=cache)
        G = g.groups
        w2 = w.reshape(G, w.shape[0] // G, -1)
        gs = matmul_nd(xp, w2.transpose(0, 2, 1), gy.reshape(prob.batch, G, -1, g.out_volume))
        gs = gs.reshape((prob.batch, prob.in_channels) + g.out_size)
        if all(s == 1 for s in g.stride) and gs.shape[2:] == g.in_size:
            return gs
        if self._inside(g):                     # one strided write into the gradient
            gx = xp.zeros(prob.x_shape, dtype=gs.dtype)
            gx[(Ellipsis,) + strided(g)] = gs
            return gx
        ge = xp.zeros(gs.shape[:2] + window_extent(g), dtype=gs.dtype)
        ge[(Ellipsis,) + strided(g)] = gs
        return _unpad(ge, prob, xp)

    def grad_weight(self, x, gy, prob, cache):
        xp, g = xp_of(x), prob.geom
        if not self._pointwise(prob):
            return self._taps(direct_kernels.direct_grad_weight, x, gy, prob, prob.w_shape,
                              zeroed=True)
        xs = self._sampled(x, prob)
        gy4 = gy.reshape(prob.batch, g.groups, -1, g.out_volume)
        gw = matmul_nd(xp, gy4, xs.transpose(0, 1, 3, 2)).sum(axis=0)
        return gw.reshape(prob.w_shape)

    # -- tap loop (1-D and 2-D) --
    def _taps(self, kernel, a, b, prob, shape, zeroed=False, cache=None):
        """One tap-loop product ``kernel(a, b, out, geo, groups)`` into a ``shape`` array
        (``algorithm.output``; 1-D problems run as 2-D over a height of one)."""
        xp, g = xp_of(a), prob.geom
        out = output(cache, shape, a.dtype, xp, zeroed)
        kernel(_as_4d(a, g.nd), _as_4d(b, g.nd), _as_4d(out, g.nd), _geo(g), g.groups)
        return out

    # -- cost model --
    def workspace_bytes(self, prob, op):
        g = prob.geom
        if self._pointwise(prob):
            return prob.batch * prob.in_channels * g.out_volume * prob.itemsize
        # one plane accumulator per thread (the larger of an input and an output plane)
        return max(math.prod(g.in_size), g.out_volume) * prob.itemsize

    def predict(self, prob, op, reuse=False):
        g, G = prob.geom, prob.geom.groups
        xb = math.prod(prob.x_shape) * prob.itemsize
        if self._pointwise(prob):
            ci, co, L = prob.in_channels // G, prob.out_channels // G, g.out_volume
            dims = {"forward": (co, L, ci), "grad_input": (ci, L, co), "grad_weight": (co, ci, L)}
            sampled = prob.batch * prob.in_channels * L * prob.itemsize
            if all(s == 1 for s in g.stride) and not any(g.pad_lo):
                copy = 0
            else:                  # one strided copy of the sampled input (and a padded one)
                copy = 2 * sampled + (0 if self._inside(g) else 2 * xb)
            return gemm_seconds(*dims[op], prob.batch * G) + stream_seconds(copy)
        if direct_kernels.wide(_geo(g), _hw(g.in_size), _hw(g.out_size)):
            return self._predict_wide(prob, op)
        # tap loop: one multiply-add per (output, input channel of its group, tap), run
        # vectorised along output rows (stride 1) or scalar; plus per-row loop overhead
        fmas = prob.flops() / 2
        wo = g.out_size[-1]
        rate = MACHINE_DIRECT["fma_per_s"] * (1.0 if g.stride[-1] == 1 else 0.35)
        rows = fmas / max(wo, 1)
        return fmas / rate + rows * MACHINE_DIRECT["row_s"] + MACHINE_DIRECT["call_s"]

    @staticmethod
    def _predict_wide(prob, op):
        """The wide-row kernels run one long vectorised loop per (plane, tap row or tap),
        junk columns included: (Ho - 1) * W + Wo sums per output plane."""
        g = prob.geom
        in_h, in_w = g.in_size if g.nd == 2 else (1,) + tuple(g.in_size)
        k_h, k_w = g.kernel if g.nd == 2 else (1,) + tuple(g.kernel)
        out_h, out_w = in_h - k_h + 1, in_w - k_w + 1
        run = (out_h - 1) * in_w + out_w
        G = g.groups
        fmas = prob.batch * prob.out_channels * (prob.in_channels // G) * k_h * k_w * run
        if op == "forward":
            paired = direct_kernels.pair_step(prob.out_channels, G) == 2 and k_w in (3, 5)
            rate = MACHINE_DIRECT["wide_forward_fma_per_s"] * (1.0 if paired else 0.6)
        else:
            rate = MACHINE_DIRECT["wide_backward_fma_per_s"]
        planes = prob.batch * max(prob.in_channels, prob.out_channels)
        return fmas / rate + planes * MACHINE_DIRECT["plane_s"] + MACHINE_DIRECT["call_s"]


def _columns_product(xp, w, xs, prob, cache):
    """``y (N, M, L) = W (M, C) @ x[n] (C, L)`` for every sample as one product of W and
    the batch's columns (C, N * L): two small transposed copies, one wide product; the
    second copy goes into the output (``algorithm.output``)."""
    n, c, length = prob.batch, prob.in_channels, prob.geom.out_volume
    cols = xp.ascontiguousarray(xs.reshape(n, c, length).transpose(1, 0, 2))
    prod = blas_matmul(w.reshape(w.shape[0], c), cols.reshape(c, n * length))
    y = output(cache, prob.y_shape, prod.dtype, xp)
    y.reshape(n, -1, length)[...] = prod.reshape(-1, n, length).transpose(1, 0, 2)
    return y


# Single-thread constants of the tap-loop kernels, measured like the runtime policy's
# machine_* entries (`lezero.runtime.show()`); the wide-row rates are scaled so that direct
# and im2col rank as they measure (docs/convolution.md, docs/performance.md).
MACHINE_DIRECT = {"fma_per_s": 1.5e9, "row_s": 10e-9, "call_s": 30e-6,
                  "wide_forward_fma_per_s": 9e9, "wide_backward_fma_per_s": 6e9,
                  "plane_s": 0.5e-6}
