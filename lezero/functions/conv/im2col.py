"""im2col + GEMM: the general convolution algorithm (any dims, stride, dilation, groups).

The patches of ``x`` are laid out as ``col (C*K, N, L)`` (channel-kernel rows, then batch
and output position), which serves two ways of running the products:

* one GEMM per group over the whole batch (large problems: the GEMMs are efficient)::

    forward      y  (Cout, N*L)  = W (Cout, C*K) @ col          then transposed to (N, Cout, L)
    grad_input   gcol            = W^T @ gy (Cout, N*L)         gy transposed first; col2im
    grad_weight  gW              = gy (Cout, N*L) @ col^T

* one small GEMM per sample (``per_sample``: LeNet-sized layers), on ``col`` viewed as
  ``(N, C*K, L)``: ``y[n] = W @ col[n]`` is written straight into ``y``, gy is read in
  place and ``gW`` is the sum of ``col[n] @ gy[n]^T``: no transposed copies.

``col`` and the GEMM products live in reused scratch buffers.  The Numba kernels in
``lezero.kernels.im2col`` gather and scatter without a padded copy; the NumPy reference
(and CuPy) loop over kernel positions with slicing.
"""
import math

from lezero.kernels import im2col as im2col_kernels
from lezero.functions.common import xp_of
from lezero.functions.conv.algorithm import (Algorithm, cached, output, reserve_for_backward,
                                             scratch, store)
from lezero.functions.conv.machine import gemm_seconds, stream_seconds
from lezero.runtime.blas import matmul_nd


def as_5d(a):
    """View (N, C, *spatial) with 1-3 spatial dims as (N, C, D, H, W)."""
    return a.reshape(a.shape[:2] + (1,) * (5 - a.ndim) + a.shape[2:])


def _single_taps(geom, in_size):
    """For a 1x1 window whose every tap lies inside the input (no padding reached): the
    slices of the input that are its columns, else None.  Those columns are a strided,
    transposed view of the input, which one NumPy copy moves faster than the gather
    kernel's loop over each plane's short rows (MobileNetV2's 1x1 layers on 5x5 maps:
    docs/performance.md)."""
    if geom.kernel_volume != 1 or any(geom.pad_lo):
        return None
    if any((o - 1) * s >= n for o, s, n in zip(geom.out_size, geom.stride, in_size)):
        return None                             # a tap in the high padding
    return (slice(None), slice(None)) + tuple(
        slice(0, (o - 1) * s + 1, s) for o, s in zip(geom.out_size, geom.stride))


def _channel_major(a):
    """``a`` (N, C, *spatial) viewed as (C, N, *spatial)."""
    return a.swapaxes(0, 1)


def im2col(x, geom, out=None, name="col"):
    """The patches of ``x`` as ``(C*K, N, L)``; into ``out`` (any strides) when given."""
    N, C = x.shape[:2]
    if out is None:
        out = scratch(name, (C * geom.kernel_volume, N, geom.out_volume), x.dtype, xp_of(x))
    taps = _single_taps(geom, x.shape[2:])
    if taps is not None and out.flags.c_contiguous:
        out.reshape((C, N) + geom.out_size)[...] = _channel_major(x[taps])
        return out
    im2col_kernels.im2col(as_5d(x), out, geom.as_3d())
    return out


def col2im(col, geom, x_shape, dtype):
    """The adjoint of ``im2col``: a new zeroed array of ``x_shape`` with ``col`` added in."""
    xp = xp_of(col)
    taps = _single_taps(geom, x_shape[2:])
    if taps is not None and col.flags.c_contiguous:
        # (one tap per input element at most: a copy, no sums)
        cols = _channel_major(col.reshape((x_shape[1], x_shape[0]) + geom.out_size))
        if geom.stride == (1,) * geom.nd and tuple(geom.out_size) == tuple(x_shape[2:]):
            return xp.ascontiguousarray(cols, dtype=dtype)
        x = xp.zeros(x_shape, dtype=dtype)
        x[taps] = cols
        return x
    x = xp.zeros(x_shape, dtype=dtype)
    im2col_kernels.col2im(col, as_5d(x), geom.as_3d())
    return x


def channels_first(gy, name="gy_t"):
    """``gy (N, C, *spatial)`` transposed to ``(C, N, L)`` in a scratch buffer (one
    sample: ``gy`` itself, reshaped)."""
    N, C = gy.shape[:2]
    L = math.prod(gy.shape[2:])
    if N == 1:
        return gy.reshape(C, 1, L)
    out = scratch(name, (C, N, L), gy.dtype, xp_of(gy))
    out[...] = gy.reshape(N, C, L).transpose(1, 0, 2)
    return out


# Per-sample products: below this many multiply-adds per sample (M*N*K of one sample's
# GEMM), a stacked matmul over the batch beats one batch-wide GEMM.  It writes y (and reads
# gy) in their own (N, C, L) layout, so the channels-first copies go, and OpenBLAS's
# small-matrix path takes each product; above it, one large GEMM is faster (measured on
# LeNet's and ResNet's layers: benchmarks/bench_conv.py).
PER_SAMPLE_MACS = 2 ** 21

# The forward pass keeps its columns for grad_weight when they are at most this large
# (and the weight wants a gradient, and the memory budget has room: runtime.budget):
# re-gathering them is a third of a small layer's backward, while for large layers the
# GEMMs dominate and the columns (K times the input) would cost too much memory to keep.
KEEP_COL_BYTES = 16 << 20


def column_bytes(prob):
    """The bytes of the columns of ``prob``."""
    g = prob.geom
    return prob.in_channels * g.kernel_volume * prob.batch * g.out_volume * prob.itemsize


def _columns(x, prob, cache, keep):
    """``im2col(x)``: the forward's kept columns when they are in ``cache``, else gathered
    anew (into a new array when ``keep`` and the budget allows, else the scratch buffer)."""
    col = cached(cache, "im2col:col", x)
    if col is None:
        g = prob.geom
        shape = (prob.in_channels * g.kernel_volume, prob.batch, g.out_volume)
        nbytes = column_bytes(prob)
        kept = reserve_for_backward(cache, nbytes) if keep and nbytes <= KEEP_COL_BYTES \
            else None
        col = im2col(x, g, out=xp_of(x).empty(shape, dtype=x.dtype) if kept else None)
        if kept:
            store(cache, "im2col:col", x, col, kept)
    return col


def per_sample(prob):
    """Whether the products of ``prob`` run as one small GEMM per sample."""
    g = prob.geom
    kdim = (prob.in_channels // g.groups) * g.kernel_volume
    return (prob.out_channels // g.groups) * g.out_volume * kdim <= PER_SAMPLE_MACS


class Im2col(Algorithm):
    name = "im2col"
    summary = "patch matrix + GEMMs (one per group, or per sample when small; any geometry)"

    @staticmethod
    def _dims(prob):
        g = prob.geom
        G = g.groups
        return G, prob.out_channels // G, (prob.in_channels // G) * g.kernel_volume, g.out_volume

    def product_flops(self, prob):
        G, M, kdim, L = self._dims(prob)
        return 2.0 * M * kdim * L * (1 if per_sample(prob) else prob.batch)

    def sample_columns(self, prob):
        # one GEMM of N * L columns, unless the products run per sample already
        return 0 if per_sample(prob) else prob.geom.out_volume

    def forward(self, x, w, prob, cache):
        xp = xp_of(x)
        G, M, kdim, L = self._dims(prob)
        N = prob.batch
        col = _columns(x, prob, cache, True).reshape(G, kdim, N, L)
        w3 = w.reshape(G, M, kdim)
        y = output(cache, prob.y_shape, x.dtype, xp)
        if per_sample(prob) or N == 1:          # (one sample: y is the product's layout)
            matmul_nd(xp, w3, col.transpose(2, 0, 1, 3), out=y.reshape(N, G, M, L))
            return y
        prod = scratch("gemm", (G, M, N * L), x.dtype, xp)
        matmul_nd(xp, w3, col.reshape(G, kdim, N * L), out=prod)
        y.reshape(N, G * M, L)[...] = prod.reshape(G * M, N, L).transpose(1, 0, 2)
        return y

    def grad_input(self, gy, w, prob, cache):
        xp = xp_of(gy)
        G, M, kdim, L = self._dims(prob)
        N = prob.batch
        wt = w.reshape(G, M, kdim).transpose(0, 2, 1)
        gcol = scratch("col", (G, kdim, N, L), gy.dtype, xp)
        if per_sample(prob):
            matmul_nd(xp, wt, gy.reshape(N, G, M, L), out=gcol.transpose(2, 0, 1, 3))
        else:
            gyt = channels_first(gy).reshape(G, M, N * L)
            matmul_nd(xp, wt, gyt, out=gcol.reshape(G, kdim, N * L))
        return col2im(gcol.reshape(G * kdim, N, L), prob.geom, prob.x_shape, gy.dtype)

    def grad_weight(self, x, gy, prob, cache):
        xp = xp_of(x)
        G, M, kdim, L = self._dims(prob)
        N = prob.batch
        col = _columns(x, prob, cache, False).reshape(G, kdim, N, L)
        if per_sample(prob):
            # (N, G, kdim, M) products, summed over the batch
            parts = scratch("gw_parts", (N, G, kdim, M), x.dtype, xp)
            matmul_nd(xp, col.transpose(2, 0, 1, 3),
                      gy.reshape(N, G, M, L).transpose(0, 1, 3, 2), out=parts)
            return parts.sum(axis=0).transpose(0, 2, 1).reshape(prob.w_shape)
        gyt = channels_first(gy).reshape(G, M, N * L)
        gw = matmul_nd(xp, gyt, col.reshape(G, kdim, N * L).transpose(0, 2, 1))
        return gw.reshape(prob.w_shape)

    # -- cost model --
    def workspace_bytes(self, prob, op):
        g = prob.geom
        col = prob.in_channels * g.kernel_volume * prob.batch * g.out_volume
        out = prob.out_channels * prob.batch * g.out_volume
        return (col + out) * prob.itemsize

    def predict(self, prob, op, reuse=False):
        G, M, kdim, L = self._dims(prob)
        N, size = prob.batch, prob.itemsize
        col = G * kdim * N * L * size
        ybytes = G * M * N * L * size
        xbytes = math.prod(prob.x_shape) * size
        # grad_weight after this algorithm's forward finds the columns kept (when small)
        gather = 0.0 if reuse and column_bytes(prob) <= KEEP_COL_BYTES else stream_seconds(col + xbytes)
        if per_sample(prob):
            # no channels-first copies; grad_weight sums the per-sample products instead
            if op == "forward":
                return stream_seconds(col + xbytes) + gemm_seconds(M, L, kdim, G * N)
            if op == "grad_input":
                return gemm_seconds(kdim, L, M, G * N) + stream_seconds(col + 2 * xbytes)
            return (gather + gemm_seconds(kdim, M, L, G * N)
                    + stream_seconds(N * G * kdim * M * size))
        if op == "forward":
            return (stream_seconds(col + xbytes) + gemm_seconds(M, N * L, kdim, G)
                    + stream_seconds(2 * ybytes))
        if op == "grad_input":
            return (stream_seconds(2 * ybytes) + gemm_seconds(kdim, N * L, M, G)
                    + stream_seconds(col + 2 * xbytes))
        return gather + stream_seconds(2 * ybytes) + gemm_seconds(M, kdim, N * L, G)
