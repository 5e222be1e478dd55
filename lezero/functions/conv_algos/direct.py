"""Direct convolution for the two shapes where a patch matrix is pure overhead.

* pointwise (1x1 kernels, any stride/padding/groups): the convolution *is* a GEMM on the
  (strided) input, ``y[n] = W @ x[n]``; no patches to build.
* depthwise (groups == in_channels): each channel meets only its own filter, so there is
  no channel sum for a GEMM to do; a loop over the K kernel taps with broadcast
  multiply-adds moves K times less memory than im2col.
"""
import itertools
import math

import numpy as np

from lezero.functions.conv_algos.base import (Algorithm, copy_window, gemm_seconds,
                                              padded_input, stream_seconds, strided,
                                              window_extent, xp_of)


def _taps(geom):
    """(flat index, offsets) of every kernel tap: offsets are tap * dilation."""
    ranges = [range(k) for k in geom.kernel]
    for p, pos in enumerate(itertools.product(*ranges)):
        yield p, tuple(t * d for t, d in zip(pos, geom.dilation))


def _unpad(ge, prob, xp):
    """Gradient on the window extent -> gradient of the unpadded input."""
    g = prob.geom
    if tuple(ge.shape[2:]) == g.in_size and not any(g.pad_lo):
        return ge
    gx = xp.zeros(prob.x_shape, dtype=ge.dtype)
    return copy_window(ge, gx, tuple(-p for p in g.pad_lo))


class Direct(Algorithm):
    name = "direct"
    summary = "1x1: a GEMM on the input itself; depthwise: a loop over the kernel taps"

    @staticmethod
    def _pointwise(prob):
        return prob.geom.kernel_volume == 1

    @staticmethod
    def _depthwise(prob):
        return prob.geom.groups == prob.in_channels and prob.geom.groups > 1

    def unsupported(self, prob):
        if self._pointwise(prob) or self._depthwise(prob):
            return None
        return "needs a 1x1 kernel or a depthwise convolution (groups == in_channels)"

    # -- pointwise --
    def _sampled(self, x, prob):
        """The input at the output grid, as (N, G, C/G, L)."""
        xp, g = xp_of(x), prob.geom
        xe = padded_input(x, g, xp)
        if all(s == 1 for s in g.stride):
            xs = xe
        else:
            xs = xp.ascontiguousarray(xe[(Ellipsis,) + strided(g)])
        return xs.reshape(prob.batch, g.groups, -1, g.out_volume)

    def forward(self, x, w, prob, cache):
        xp, G = xp_of(x), prob.geom.groups
        if not self._pointwise(prob):
            return self._dw_forward(x, w, prob)
        y = xp.matmul(w.reshape(G, w.shape[0] // G, -1), self._sampled(x, prob))
        return y.reshape(prob.y_shape)

    def grad_input(self, gy, w, prob, cache):
        xp, g = xp_of(gy), prob.geom
        if not self._pointwise(prob):
            return self._dw_grad_input(gy, w, prob)
        G = g.groups
        w2 = w.reshape(G, w.shape[0] // G, -1)
        gs = xp.matmul(w2.transpose(0, 2, 1), gy.reshape(prob.batch, G, -1, g.out_volume))
        gs = gs.reshape((prob.batch, prob.in_channels) + g.out_size)
        ext = window_extent(g)
        if all(s == 1 for s in g.stride):
            ge = gs
        else:
            ge = xp.zeros(gs.shape[:2] + ext, dtype=gs.dtype)
            ge[(Ellipsis,) + strided(g)] = gs
        return _unpad(ge, prob, xp)

    def grad_weight(self, x, gy, prob, cache):
        xp, g = xp_of(x), prob.geom
        if not self._pointwise(prob):
            return self._dw_grad_weight(x, gy, prob)
        xs = self._sampled(x, prob)
        gy4 = gy.reshape(prob.batch, g.groups, -1, g.out_volume)
        gw = xp.matmul(gy4, xs.transpose(0, 1, 3, 2)).sum(axis=0)
        return gw.reshape(prob.w_shape)

    # -- depthwise: y[n, c*m + j] = sum_p w[c*m + j, 0, p] * x[n, c, shifted by tap p] --
    def _dw_shapes(self, prob):
        g = prob.geom
        c = prob.in_channels
        mult = prob.out_channels // c
        return c, mult, (1,) * g.nd

    def _dw_forward(self, x, w, prob):
        xp, g = xp_of(x), prob.geom
        c, mult, ones = self._dw_shapes(prob)
        xe = padded_input(x, g, xp)
        w3 = w.reshape((c, mult, -1) + ones)
        y = xp.zeros((prob.batch, c, mult) + g.out_size, dtype=x.dtype)
        for p, off in _taps(g):
            y += xe[(Ellipsis,) + strided(g, off)][:, :, None] * w3[:, :, p]
        return y.reshape(prob.y_shape)

    def _dw_grad_input(self, gy, w, prob):
        xp, g = xp_of(gy), prob.geom
        c, mult, ones = self._dw_shapes(prob)
        gy5 = gy.reshape((prob.batch, c, mult) + g.out_size)
        w3 = w.reshape((c, mult, -1) + ones)
        ge = xp.zeros((prob.batch, c) + window_extent(g), dtype=gy.dtype)
        for p, off in _taps(g):
            term = gy5 * w3[:, :, p]
            ge[(Ellipsis,) + strided(g, off)] += term[:, :, 0] if mult == 1 else term.sum(axis=2)
        return _unpad(ge, prob, xp)

    def _dw_grad_weight(self, x, gy, prob):
        xp, g = xp_of(x), prob.geom
        c, mult, _ = self._dw_shapes(prob)
        n, L = prob.batch, g.out_volume
        xe = padded_input(x, g, xp)
        gy4 = gy.reshape(n, c, mult, L)
        gw = xp.empty((c, mult, g.kernel_volume), dtype=x.dtype)
        for p, off in _taps(g):
            xs = xe[(Ellipsis,) + strided(g, off)].reshape(n, c, 1, L)
            gw[:, :, p] = (gy4 * xs).sum(axis=(0, 3))
        return gw.reshape(prob.w_shape)

    # -- cost model --
    def workspace_bytes(self, prob, op):
        if self._pointwise(prob):
            g = prob.geom
            return prob.batch * prob.in_channels * g.out_volume * prob.itemsize
        return math.prod(prob.y_shape) * prob.itemsize

    def predict(self, prob, op, reuse=False):
        g, G = prob.geom, prob.geom.groups
        xb = math.prod(prob.x_shape) * prob.itemsize
        yb = math.prod(prob.y_shape) * prob.itemsize
        if self._pointwise(prob):
            ci, co, L = prob.in_channels // G, prob.out_channels // G, g.out_volume
            dims = {"forward": (co, L, ci), "grad_input": (ci, L, co), "grad_weight": (co, ci, L)}
            copy = 0 if all(s == 1 for s in g.stride) and not any(g.pad_lo) else 2 * xb
            return gemm_seconds(*dims[op], prob.batch * G) + stream_seconds(copy)
        # depthwise: K broadcast multiply-adds over the output (measured ~1.5 passes each)
        return stream_seconds(1.5 * g.kernel_volume * yb + 2 * xb, calls=2 * g.kernel_volume)
