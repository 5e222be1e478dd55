"""im2col + GEMM: the general convolution algorithm (any dims, stride, dilation, groups).

The patches of ``x`` are laid out as ``col (C*K, N*L)`` (channel-kernel rows, batch-position
columns), so each product is a single GEMM per group over the whole batch:

    forward      y  (Cout, N*L)  = W (Cout, C*K) @ col
    grad_input   gcol            = W^T @ gy (Cout, N*L),   then col2im
    grad_weight  gW              = gy (Cout, N*L) @ col^T

``col`` and the GEMM products live in reused scratch buffers.  The Numba kernels in
``lezero.kernels.im2col`` gather and scatter without a padded copy; the NumPy reference
(and CuPy) loop over kernel positions with slicing.
"""
import math

from lezero.kernels import im2col as im2col_kernels
from lezero.functions.common import xp_of
from lezero.functions.conv.algorithm import Algorithm, scratch
from lezero.functions.conv.machine import gemm_seconds, stream_seconds


def as_5d(a):
    """View (N, C, *spatial) with 1-3 spatial dims as (N, C, D, H, W)."""
    return a.reshape(a.shape[:2] + (1,) * (5 - a.ndim) + a.shape[2:])


def im2col(x, geom, out=None, name="col"):
    """The patches of ``x`` as ``(C*K, N, L)``; into ``out`` (any strides) when given."""
    N, C = x.shape[:2]
    if out is None:
        out = scratch(name, (C * geom.kernel_volume, N, geom.out_volume), x.dtype, xp_of(x))
    im2col_kernels.im2col(as_5d(x), out, geom.as_3d())
    return out


def col2im(col, geom, x_shape, dtype):
    """The adjoint of ``im2col``: a new zeroed array of ``x_shape`` with ``col`` added in."""
    xp = xp_of(col)
    x = xp.zeros(x_shape, dtype=dtype)
    im2col_kernels.col2im(col, as_5d(x), geom.as_3d())
    return x


def channels_first(gy, name="gy_t"):
    """``gy (N, C, *spatial)`` transposed to ``(C, N, L)`` in a scratch buffer."""
    N, C = gy.shape[:2]
    L = math.prod(gy.shape[2:])
    out = scratch(name, (C, N, L), gy.dtype, xp_of(gy))
    out[...] = gy.reshape(N, C, L).transpose(1, 0, 2)
    return out


class Im2col(Algorithm):
    name = "im2col"
    summary = "patch matrix + one GEMM per group (any geometry)"

    def forward(self, x, w, prob, cache):
        xp = xp_of(x)
        g, G = prob.geom, prob.geom.groups
        N, Cout, L = prob.batch, prob.out_channels, g.out_volume
        kdim = w.shape[1] * g.kernel_volume
        col = im2col(x, g).reshape(G, kdim, N * L)
        prod = scratch("gemm", (G, Cout // G, N * L), x.dtype, xp)
        xp.matmul(w.reshape(G, Cout // G, kdim), col, out=prod)
        y = xp.empty(prob.y_shape, dtype=x.dtype)
        y.reshape(N, Cout, L)[...] = prod.reshape(Cout, N, L).transpose(1, 0, 2)
        return y

    def grad_input(self, gy, w, prob, cache):
        xp = xp_of(gy)
        g, G = prob.geom, prob.geom.groups
        N, Cout, L = prob.batch, prob.out_channels, g.out_volume
        kdim = w.shape[1] * g.kernel_volume
        gyt = channels_first(gy).reshape(G, Cout // G, N * L)
        gcol = scratch("col", (G, kdim, N * L), gy.dtype, xp)
        xp.matmul(w.reshape(G, Cout // G, kdim).transpose(0, 2, 1), gyt, out=gcol)
        return col2im(gcol.reshape(G * kdim, N, L), g, prob.x_shape, gy.dtype)

    def grad_weight(self, x, gy, prob, cache):
        xp = xp_of(x)
        g, G = prob.geom, prob.geom.groups
        N, Cout, L = prob.batch, prob.out_channels, g.out_volume
        kdim = (prob.in_channels // G) * g.kernel_volume
        col = im2col(x, g).reshape(G, kdim, N * L)
        gyt = channels_first(gy).reshape(G, Cout // G, N * L)
        gw = xp.matmul(gyt, col.transpose(0, 2, 1))
        return gw.reshape(prob.w_shape)

    # -- cost model --
    def workspace_bytes(self, prob, op):
        g = prob.geom
        col = prob.in_channels * g.kernel_volume * prob.batch * g.out_volume
        out = prob.out_channels * prob.batch * g.out_volume
        return (col + out) * prob.itemsize

    def predict(self, prob, op, reuse=False):
        g, G = prob.geom, prob.geom.groups
        NL = prob.batch * g.out_volume
        kdim = (prob.in_channels // G) * g.kernel_volume
        col = prob.in_channels * g.kernel_volume * NL * prob.itemsize
        ybytes = prob.out_channels * NL * prob.itemsize
        xbytes = math.prod(prob.x_shape) * prob.itemsize
        if op == "forward":
            return (stream_seconds(col + xbytes) + gemm_seconds(prob.out_channels // G, NL, kdim, G)
                    + stream_seconds(2 * ybytes))
        if op == "grad_input":
            return (stream_seconds(2 * ybytes) + gemm_seconds(kdim, NL, prob.out_channels // G, G)
                    + stream_seconds(col + 2 * xbytes))
        return (stream_seconds(col + xbytes) + stream_seconds(2 * ybytes)
                + gemm_seconds(prob.out_channels // G, kdim, NL, G))
