"""FFT convolution: pays off for large kernels, where im2col's K-fold patch copy dominates.

Correlation in space is a product in frequency: ``y = irfft(rfft(x) * conj(rfft(w)))``
evaluated on the window extent ``E`` (no wrap-around reaches the valid outputs), and the
channel sum becomes one complex GEMM per frequency.  Stride and dilation are handled by
sampling the full result and by spreading the kernel; any number of groups works.

    forward       Y[f]  = X[f] @ conj(W[f])            (n, c) x (c, o)
    grad_input    GX[f] = GY[f] @ W[f]^T                the upsampled gradient, convolved
    grad_weight   GW[f] = conj(GY[f])^T @ X[f]          summed over the batch
"""
import math

import numpy as np

from lezero.functions.common import xp_of
from lezero.functions.conv.algorithm import Algorithm, copy_window, padded_input, strided, window_extent
from lezero.functions.conv.machine import MACHINE, gemm_seconds, stream_seconds


def good_size(n):
    """The smallest m >= n whose prime factors are 2, 3 and 5 (fast FFT lengths)."""
    m = n
    while True:
        r = m
        for p in (2, 3, 5):
            while r % p == 0:
                r //= p
        if r == 1:
            return m
        m += 1


def _complex(dtype):
    return np.complex64 if np.dtype(dtype) == np.float32 else np.complex128


class FFT(Algorithm):
    name = "fft"
    summary = "rfft, one complex GEMM per frequency, irfft (large kernels)"

    def _plan(self, prob):
        g = prob.geom
        ext = window_extent(g)
        return ext, tuple(good_size(e) for e in ext), tuple(range(-g.nd, 0))

    def _spectrum(self, a, fs, axes, fold_groups, G):
        """rfftn over the spatial axes, laid out as (freq, G, rows, cols) for the GEMMs:
        ``fold_groups`` says which of the two leading axes carries the channels."""
        xp = xp_of(a)
        spec = xp.fft.rfftn(a, s=fs, axes=axes).astype(_complex(a.dtype), copy=False)
        n0, n1 = spec.shape[:2]
        nf = math.prod(spec.shape[2:])
        if fold_groups == 1:        # (batch, channels): (F, G, batch, channels / G)
            return spec.reshape(n0, G, n1 // G, nf).transpose(3, 1, 0, 2), spec.shape[2:]
        # (channels, channels/G): weights, (F, G, out/G, in/G)
        return spec.reshape(G, n0 // G, n1, nf).transpose(3, 0, 1, 2), spec.shape[2:]

    def _spread_weight(self, w, prob):
        """The kernel with ``dilation - 1`` zeros between taps."""
        g = prob.geom
        if all(d == 1 for d in g.dilation):
            return w
        xp = xp_of(w)
        span = tuple(d * (k - 1) + 1 for d, k in zip(g.dilation, g.kernel))
        wd = xp.zeros(w.shape[:2] + span, dtype=w.dtype)
        wd[(Ellipsis,) + tuple(slice(None, None, d) for d in g.dilation)] = w
        return wd

    def _back(self, prod, fshape, fs, axes, dtype):
        """(F, G, rows, cols) GEMM result -> real (rows, G*cols, *fs) by irfftn."""
        xp = xp_of(prod)
        F, G, r, c = prod.shape
        spec = prod.transpose(2, 1, 3, 0).reshape((r, G * c) + tuple(fshape))
        return xp.fft.irfftn(spec, s=fs, axes=axes).astype(dtype, copy=False)

    def forward(self, x, w, prob, cache):
        xp = xp_of(x)
        g, G = prob.geom, prob.geom.groups
        ext, fs, axes = self._plan(prob)
        X, fshape = self._spectrum(padded_input(x, g, xp), fs, axes, 1, G)
        W, _ = self._spectrum(self._spread_weight(w, prob), fs, axes, 0, G)
        prod = xp.matmul(X, xp.conj(W).transpose(0, 1, 3, 2))        # (F, G, N, Cout/G)
        full = self._back(prod, fshape, fs, axes, x.dtype)
        return xp.ascontiguousarray(full[(Ellipsis,) + strided(g)])

    def _upsampled(self, gy, prob, ext):
        """``gy`` placed on the stride grid of the window extent (zeros elsewhere)."""
        g = prob.geom
        if all(s == 1 for s in g.stride) and tuple(gy.shape[2:]) == ext:
            return gy
        xp = xp_of(gy)
        up = xp.zeros(gy.shape[:2] + ext, dtype=gy.dtype)
        up[(Ellipsis,) + strided(g)] = gy
        return up

    def grad_input(self, gy, w, prob, cache):
        xp = xp_of(gy)
        g, G = prob.geom, prob.geom.groups
        ext, fs, axes = self._plan(prob)
        GY, fshape = self._spectrum(self._upsampled(gy, prob, ext), fs, axes, 1, G)
        W, _ = self._spectrum(self._spread_weight(w, prob), fs, axes, 0, G)
        prod = xp.matmul(GY, W)                                      # (F, G, N, Cin/G)
        full = self._back(prod, fshape, fs, axes, gy.dtype)
        gx = xp.zeros(prob.x_shape, dtype=gy.dtype)
        ext_slice = (Ellipsis,) + tuple(slice(0, e) for e in ext)
        return copy_window(full[ext_slice], gx, tuple(-p for p in g.pad_lo))

    def grad_weight(self, x, gy, prob, cache):
        xp = xp_of(x)
        g, G = prob.geom, prob.geom.groups
        ext, fs, axes = self._plan(prob)
        X, fshape = self._spectrum(padded_input(x, g, xp), fs, axes, 1, G)
        GY, _ = self._spectrum(self._upsampled(gy, prob, ext), fs, axes, 1, G)
        prod = xp.matmul(xp.conj(GY).transpose(0, 1, 3, 2), X)       # (F, G, Cout/G, Cin/G)
        full = self._back(prod, fshape, fs, axes, x.dtype)    # (Cout/G, G*Cin/G, ...)
        # rows are out-channels within a group, columns (group, in-channel): regroup
        cog, cig = prod.shape[2], prod.shape[3]
        full = full.reshape((cog, G, cig) + fs).transpose((1, 0, 2) + tuple(range(3, 3 + g.nd)))
        full = full.reshape((G * cog, cig) + fs)
        taps = tuple(slice(0, d * (k - 1) + 1, d) for d, k in zip(g.dilation, g.kernel))
        return xp.ascontiguousarray(full[(Ellipsis,) + taps])

    # -- cost model --
    def _spectrum_sizes(self, prob):
        _, fs, _ = self._plan(prob)
        full = math.prod(fs)
        half = full // fs[-1] * (fs[-1] // 2 + 1)
        return full, half

    def workspace_bytes(self, prob, op):
        _, half = self._spectrum_sizes(prob)
        n, ci, co = prob.batch, prob.in_channels, prob.out_channels
        planes = n * ci + n * co + co * ci // prob.geom.groups
        return 2 * planes * half * 2 * prob.itemsize      # spectra and their transposes

    def predict(self, prob, op, reuse=False):
        full, half = self._spectrum_sizes(prob)
        n, ci, co, G = prob.batch, prob.in_channels, prob.out_channels, prob.geom.groups
        per_plane = 2.5 * full * max(1.0, math.log2(full))
        planes = n * ci + n * co + co * ci // G
        fft = planes * per_plane / (MACHINE["fft_gflops"] * 1e9)
        a, b, c = {"forward": (n, co // G, ci // G), "grad_input": (n, ci // G, co // G),
                   "grad_weight": (co // G, ci // G, n)}[op]
        return (fft + gemm_seconds(a, b, c, half * G, complex_=True)
                + stream_seconds(3 * planes * half * 2 * prob.itemsize))

