"""Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3, stride-1, dilation-1, one-group convolutions.

In the transformed domain a convolution is ``alpha^2`` independent channel contractions
(one GEMM per tile position), which take 2.25x (F(2x2)) or 4x (F(4x4)) fewer multiplies
than the direct method.  All three products stay in that domain:

    forward       M  = U V            U = G w G^T,  V = BT d BT^T,  y  = AT M AT^T
    grad_input    M' = U^T Gy         Gy = A gy A^T (AT^T),          gx = B M' B^T (overlap-add)
    grad_weight   Mw = Gy V^T                                       gw = G^T Mw G

so one backward transforms ``gy`` once and uses it twice, and reuses ``V`` and ``U`` from
the forward pass (kept in the call's cache when the weight needs a gradient).
"""
import math

import numpy as np

from lezero.kernels import winograd as winograd_kernels
from lezero.functions.common import xp_of
from lezero.functions.conv.algorithm import (Algorithm, cached, fixed_transform,
                                             keep_within_budget, output,
                                             reserve_for_backward, scratch, store)
from lezero.functions.conv.machine import gemm_seconds, stream_seconds
from lezero.runtime import budget
from lezero.runtime.blas import matmul as blas_matmul, matmul_nd

_MATS = {}


def matrices(m, dtype, xp):
    """``(AT, G, BT)`` for F(m, 3) as arrays of ``dtype`` on the backend ``xp``."""
    key = (m, np.dtype(dtype).str, xp.__name__)
    if key not in _MATS:
        at, g, bt = winograd_kernels.winograd_matrices(m, 3)
        _MATS[key] = tuple(xp.asarray(a, dtype=dtype) for a in (at, g, bt))
    return _MATS[key]


def _kron(G):
    """``G (x) G``: (alpha^2, r^2), so that ``vec(G w G^T) = (G (x) G) vec(w)``."""
    a, r = G.shape
    return (G[:, None, :, None] * G[None, :, None, :]).reshape(a * a, r * r)


def filter_transform(w, G):
    """``U[i, j] = G w G^T`` for every (out, in) filter, as (alpha^2, Cout, Cin): one GEMM
    ``(G (x) G) @ w^T`` over all filters at once, written straight in U's layout (the
    filters, viewed as (Cout * Cin, r^2), enter transposed: no copy)."""
    o, c, r, _ = w.shape
    a = G.shape[0]
    return blas_matmul(_kron(G), w.reshape(o * c, r * r).T).reshape(a * a, o, c)


def filter_transform_adjoint(m, G):
    """``G^T M G`` for every (out, in) pair of ``m`` (alpha^2, Cout, Cin) -> (Cout, Cin, r, r):
    the adjoint GEMM, ``M^T @ (G (x) G)``."""
    a2, o, c = m.shape
    r = G.shape[1]
    return blas_matmul(m.reshape(a2, o * c).T, _kron(G)).reshape(o, c, r, r)


class Winograd(Algorithm):
    """Winograd F(m x m, 3 x 3)."""

    def __init__(self, m):
        self.m = m
        self.alpha = m + 2
        self.name = f"winograd_{m}x{m}"
        self.summary = (f"F({m}x{m},3x3): {self.alpha ** 2} GEMMs on transformed tiles, "
                        f"{9 * m * m / self.alpha ** 2:.2f}x fewer multiplies")

    def unsupported(self, prob):
        g = prob.geom
        if not g.is_winograd_3x3():
            return "needs a 3x3 kernel, stride 1, dilation 1 and groups=1"
        return None

    def _tiles(self, prob):
        ho, wo = prob.geom.out_size
        return math.ceil(ho / self.m), math.ceil(wo / self.m)

    def _filter(self, w, prob, cache):
        """U = G w G^T as (alpha^2, Cout, Cin), cached per weight array (from call to
        call for a weight declared fixed: ``algorithm.declare_fixed``)."""
        u = cached(cache, f"{self.name}:U", w)
        if u is None:
            G = matrices(self.m, w.dtype, xp_of(w))[1]
            u = fixed_transform(w, f"{self.name}:U", lambda: filter_transform(w, G))
            keep_within_budget(cache, f"{self.name}:U", w, u)
        return u

    def shared(self, op, w, prob, cache):
        """U, transformed once for all batch parts (forward and grad_input read it)."""
        if op == "grad_weight":
            return {}
        return {f"{self.name}:U": (w, self._filter(w, prob, cache))}

    def _input(self, x, prob, cache, keep):
        """V = BT d BT^T for every tile: (alpha^2, Cin, tiles); kept for grad_weight."""
        v = cached(cache, f"{self.name}:V", x)
        if v is not None:
            return v
        xp = xp_of(x)
        th, tw = self._tiles(prob)
        shape = (self.alpha ** 2, x.shape[1], x.shape[0] * th * tw)
        kept = reserve_for_backward(cache, math.prod(shape) * x.itemsize) if keep else None
        v = xp.empty(shape, dtype=x.dtype) if kept else scratch("wino_V", shape, x.dtype, xp)
        _, _, BT = matrices(self.m, x.dtype, xp)
        py, px = prob.geom.pad_lo
        winograd_kernels.tiles_in(x, BT, v, self.m, py, px, th, tw)
        if kept:
            store(cache, f"{self.name}:V", x, v, kept)
        return v

    def _grad_out(self, gy, prob, cache):
        """Gy = A gy A^T for every output tile: (alpha^2, Cout, tiles), shared by the
        two gradient products of one backward."""
        g = cached(cache, f"bwd:{self.name}:Gy", gy)
        if g is not None:
            return g
        xp = xp_of(gy)
        th, tw = self._tiles(prob)
        g = xp.empty((self.alpha ** 2, gy.shape[1], gy.shape[0] * th * tw), dtype=gy.dtype)
        AT, _, _ = matrices(self.m, gy.dtype, xp)
        winograd_kernels.tiles_in(gy, AT.T, g, self.m, 0, 0, th, tw)
        return store(cache, f"bwd:{self.name}:Gy", gy, g)

    def product_flops(self, prob):
        # one (Cout, Cin) @ (Cin, tiles) product per point of the alpha x alpha tile
        th, tw = self._tiles(prob)
        return 2.0 * prob.out_channels * prob.in_channels * prob.batch * th * tw

    def forward(self, x, w, prob, cache):
        xp = xp_of(x)
        th, tw = self._tiles(prob)
        u = self._filter(w, prob, cache)
        v = self._input(x, prob, cache, keep=True)
        prod = scratch("wino_M", (self.alpha ** 2, w.shape[0], v.shape[2]), x.dtype, xp)
        matmul_nd(xp, u, v, out=prod)
        y = output(cache, prob.y_shape, x.dtype, xp, zeroed=True)
        AT, _, _ = matrices(self.m, x.dtype, xp)
        winograd_kernels.tiles_out(prod, AT, y, self.m, 0, 0, th, tw)
        return y

    def grad_input(self, gy, w, prob, cache):
        xp = xp_of(gy)
        th, tw = self._tiles(prob)
        u = self._filter(w, prob, cache)
        gt = self._grad_out(gy, prob, cache)
        prod = scratch("wino_M", (self.alpha ** 2, w.shape[1], gt.shape[2]), gy.dtype, xp)
        matmul_nd(xp, u.transpose(0, 2, 1), gt, out=prod)
        gx = output(cache, prob.x_shape, gy.dtype, xp, zeroed=True)
        _, _, BT = matrices(self.m, gy.dtype, xp)
        py, px = prob.geom.pad_lo
        winograd_kernels.tiles_out(prod, BT.T, gx, self.m, py, px, th, tw)
        return gx

    def grad_weight(self, x, gy, prob, cache):
        xp = xp_of(x)
        v = self._input(x, prob, cache, keep=False)
        gt = self._grad_out(gy, prob, cache)
        mw = matmul_nd(xp, gt, v.transpose(0, 2, 1))           # (alpha^2, Cout, Cin)
        return filter_transform_adjoint(mw, matrices(self.m, x.dtype, xp)[1])

    # -- cost model --
    def _sizes(self, prob):
        th, tw = self._tiles(prob)
        t = prob.batch * th * tw
        a2 = self.alpha ** 2
        per_channel = a2 * t * prob.itemsize
        return t, per_channel * prob.in_channels, per_channel * prob.out_channels

    def workspace_bytes(self, prob, op):
        _, vb, mb = self._sizes(prob)
        return vb + mb

    def predict(self, prob, op, reuse=False):
        t, vb, mb = self._sizes(prob)
        ci, co, a2 = prob.in_channels, prob.out_channels, self.alpha ** 2
        xb = math.prod(prob.x_shape) * prob.itemsize
        yb = math.prod(prob.y_shape) * prob.itemsize
        # A transform streams its plane and its tiles once, plus a set-up per (n, c)
        # plane.  At ResNet's shapes (both tile sizes, 2026-12-07) the kernels ran in
        # 0.5-1.1x this on one thread, as the products run in about half gemm_seconds:
        # priced alike, the two rank the algorithms as measured (docs/performance.md).
        px, py = prob.batch * ci, prob.batch * co
        tin = stream_seconds(xb + vb, planes=px)        # x -> V
        tgy = stream_seconds(yb + mb, planes=py)        # gy -> Gy
        # the filters' transform (or its adjoint): one GEMM that writes (or reads) alpha^2
        # numbers per filter: with many channels on a small map it outweighs the tiles;
        # a fixed weight's forward finds it made when the budget has room to keep it
        ubytes = a2 * co * ci * prob.itemsize
        filters = stream_seconds(ubytes)
        if op == "forward":
            if prob.fixed_weight and ubytes <= budget.room():
                filters = 0.0
            return (filters + tin + gemm_seconds(co, t, ci, a2)
                    + stream_seconds(mb + yb, planes=py))
        if op == "grad_input":      # U kept by the forward pass when it ran
            return ((0.0 if reuse else filters) + tgy + gemm_seconds(ci, t, co, a2)
                    + stream_seconds(vb + xb, planes=px))
        if reuse:       # V kept by the forward pass, Gy made by grad_input
            return filters + gemm_seconds(co, ci, t, a2)
        return filters + tin + tgy + gemm_seconds(co, ci, t, a2)
