"""``Normalize``: the one fused Function behind batch, layer, group, instance and RMS norm.

    xhat = (x - mean) * rstd,   rstd = 1 / sqrt(var + eps),   y = xhat * weight + bias

with ``mean`` and the biased ``var`` taken over some axes of a view of ``x`` (group norm
views (N, C, ...) as (N, G, -1)), and ``weight``/``bias`` broadcast along the channel or
trailing axes.  RMS norm is the same without centring (``mean`` = 0).

Forward computes the statistics once and keeps the per-channel ``mean`` and ``rstd``
beside its input (PyTorch's choice): ``xhat`` is recomputed in backward, one pass over x,
instead of a second activation-sized array held for the whole step.  Backward has two forms of the same formula, with ``g = gy * weight`` and means over the axes:

    gx = rstd * (g - mean(g) - xhat * mean(g * xhat)),   gweight = sum(gy * xhat),
    gbias = sum(gy)

* ``backward_arrays``, first order (the usual case): raw array arithmetic on the saved
  input and statistics;
* ``backward``, under ``create_graph``: the statistics are recomputed from ``x`` with
  LeZero operators and the formula is written with them, so the gradient is a graph that
  can be differentiated again (to any order).

Layer and RMS norm on NumPy arrays run both passes as Numba kernels
(``lezero.kernels.layernorm``: one read of x per pass instead of about fifteen array
passes, and no saved ``xhat``), and so do batch norm's per-channel statistics
(``lezero.kernels.batchnorm``); this array code is their reference.
"""
import math

import numpy as np

from lezero import kernels
from lezero.kernels import batchnorm, layernorm
from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.reduction import sum as _sum
from lezero.functions.shape import reshape, sum_to, sum_to_array

_KERNEL_DTYPES = (np.float32, np.float64)


class Normalize(Function):
    """Inputs: x, then weight and/or bias when present (see ``has_weight``/``has_bias``).

    ``view``: the shape the statistics see (None: x's own); ``axes``: the reduced axes of
    that view; ``param_shape``: weight's and bias's shape broadcast against x.
    """

    def __init__(self, axes, eps, view=None, param_shape=None, has_weight=False,
                 has_bias=False, center=True, trailing=False, zero_var_rstd=False):
        self.axes = tuple(axes)
        self.eps = eps
        self.view = view
        self.param_shape = param_shape
        self.has_weight = has_weight
        self.has_bias = has_bias
        self.center = center
        # Statistics over the trailing axes, parameters of those axes' shape (layer and
        # RMS norm): the Numba kernel in lezero.kernels.layernorm can run it.
        self.trailing = trailing
        self.use_kernel = False
        self.channel_kernel = False     # batch norm's statistics on lezero.kernels.batchnorm
        # PyTorch's batch/instance norm: with eps == 0 a zero variance gives rstd 0 (an
        # output of 0), where layer and group norm give 1 / sqrt(0) = inf (NaN).
        self.zero_var_rstd = zero_var_rstd and eps == 0

    reads_outputs = False

    # ----- forward -------------------------------------------------------------------
    def forward(self, x, *params):
        weight = params[0] if self.has_weight else None
        bias = params[-1] if self.has_bias else None
        self.use_kernel = (self.trailing and x.dtype in _KERNEL_DTYPES and x.size > 0
                           and kernels.enabled(x))
        if self.use_kernel:
            w, b = self._kernel_params(x, weight, bias)
            y, self.mean, self.rstd = layernorm.layer_norm(x, w, b, self.eps, self.center)
            return y
        self.channel_kernel = self._per_channel(x)
        if self.channel_kernel:                 # batch norm's statistics: lezero.kernels
            w, b = self._kernel_params(x, weight, bias)
            y, *stats = batchnorm.batch_norm(x, w, b, self.eps, self.zero_var_rstd)
            self.mean, self.var, self.rstd = (s.reshape(self.param_shape) for s in stats)
            return y
        with np.errstate(divide="ignore", invalid="ignore"):
            # a NaN/inf row, or a constant one with eps=0, gives NaN (PyTorch's result)
            return self._array_forward(x, weight, bias)

    def _array_forward(self, x, weight, bias):
        xp = xp_of(x)
        xv = x.reshape(self.view) if self.view is not None else x
        if self.center:
            self.mean = xv.mean(axis=self.axes, keepdims=True)
            xhat = xv - self.mean
            self.var = (xhat * xhat).mean(axis=self.axes, keepdims=True)
        else:
            xhat = xv.copy()
            self.var = (xv * xv).mean(axis=self.axes, keepdims=True)
        rstd = self.var + x.dtype.type(self.eps)
        xp.sqrt(rstd, out=rstd)
        xp.reciprocal(rstd, out=rstd)
        if self.zero_var_rstd:
            rstd[self.var == 0] = 0
        self.rstd = rstd
        xhat *= rstd
        xhat = xhat.reshape(x.shape)
        y = xhat                                # not kept: the output may reuse it
        if weight is not None:
            w = weight.reshape(self.param_shape)
            if w.dtype == y.dtype:
                y *= w
            else:
                y = y * w
        if bias is not None:
            y += bias.reshape(self.param_shape)
        return y

    def _per_channel(self, x):
        """True for statistics per channel of (N, C, ...) that the batch-norm kernel takes."""
        return (self.center and self.view is None and x.ndim >= 3
                and self.axes == (0,) + tuple(range(2, x.ndim))
                and self.param_shape == (1, x.shape[1]) + (1,) * (x.ndim - 2)
                and batchnorm.usable(x))

    def _kernel_params(self, x, weight, bias):
        """The kernel always applies weight and bias: ones and zeros stand in for absent
        ones."""
        size = math.prod(self.param_shape)
        xp = xp_of(x)
        w = weight if weight is not None else xp.ones(size, x.dtype)
        b = bias if bias is not None else xp.zeros(size, x.dtype)
        return w, b

    # ----- backward ------------------------------------------------------------------
    def backward_arrays(self, gy):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._array_backward(gy)

    def backward(self, gy):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._graph_backward(gy)

    def _inv_count(self, shape):
        """1 / the number of values each statistic covers (0 for none: empty axes)."""
        n = math.prod(shape[a] for a in self.axes)
        return 1.0 / n if n else 0.0

    def _param_grads(self, gy, xhat, sum_to_shape, reshape_fn):
        """[gweight][, gbias] for whichever of them is an input (None if not needed)."""
        grads = []
        terms = ([lambda: gy * xhat] if self.has_weight else []) + \
            ([lambda: gy] if self.has_bias else [])
        for idx, term in enumerate(terms, start=1):
            need = self.needs_input_grad[idx]
            grads.append(reshape_fn(sum_to_shape(term(), self.param_shape),
                                    self.inputs[idx].shape) if need else None)
        return grads

    def _array_backward(self, gy):
        if self.use_kernel:
            return self._kernel_backward(gy)
        if self.channel_kernel and batchnorm.usable(gy):
            return self._channel_backward(gy)
        xhat = self._xhat()
        grads = self._param_grads(gy, xhat, sum_to_array, lambda a, s: a.reshape(s))
        gx = None
        if self.needs_input_grad[0]:
            g = gy * self.inputs[1].data.reshape(self.param_shape) if self.has_weight \
                else gy.copy()
            view = self.view or g.shape
            g = g.reshape(view)
            xh = xhat.reshape(view)
            inv_n = g.dtype.type(self._inv_count(view))
            proj = (g * xh).sum(axis=self.axes, keepdims=True)
            proj *= inv_n
            if self.center:
                g -= g.sum(axis=self.axes, keepdims=True) * inv_n
            g -= xh * proj
            g *= self.rstd
            gx = g.reshape(gy.shape)
        return (gx, *grads)

    def _xhat(self):
        """(x - mean) * rstd again, from the kept input and statistics."""
        x = self.inputs[0].data
        xv = x.reshape(self.view) if self.view is not None else x
        xhat = xv - self.mean if self.center else xv.copy()
        xhat *= self.rstd
        return xhat.reshape(x.shape)

    def _kernel_backward(self, gy):
        """Layer/RMS norm's gradients on the kernel (``use_kernel``)."""
        x = self.inputs[0].data
        w, _ = self._kernel_params(x, self.inputs[1].data if self.has_weight else None, None)
        return self._kernel_grads(*layernorm.layer_norm_grad(x, gy, w, self.mean, self.rstd,
                                                             self.center))

    def _channel_backward(self, gy):
        """Batch norm's gradients on the kernel (``channel_kernel``)."""
        x = self.inputs[0].data
        w, _ = self._kernel_params(x, self.inputs[1].data if self.has_weight else None, None)
        return self._kernel_grads(*batchnorm.batch_norm_grad(
            x, gy, w, self.mean.reshape(-1), self.rstd.reshape(-1), self.needs_input_grad[0]))

    def _kernel_grads(self, gx, gw, gb):
        """(gx, [gweight], [gbias]) from a kernel's three, None where none is needed."""
        grads = [gx if self.needs_input_grad[0] else None]
        for idx, g in enumerate([gw] * self.has_weight + [gb] * self.has_bias, start=1):
            grads.append(g if self.needs_input_grad[idx] else None)
        return tuple(grads)

    def _graph_backward(self, gy):
        x = self.inputs[0]
        view = self.view or x.shape
        inv_n = self._inv_count(view)
        xv = reshape(x, view)
        xc = xv - _sum(xv, axis=self.axes, keepdims=True) * inv_n if self.center else xv
        var = _sum(xc * xc, axis=self.axes, keepdims=True) * inv_n
        if self.zero_var_rstd:        # rstd 0 where var == 0 (see __init__), no inf * 0
            zero = (var.data == 0).astype(var.dtype)
            rstd = (var + (self.eps + zero)) ** -0.5 * (1 - zero)
        else:
            rstd = (var + self.eps) ** -0.5
        xhat = xc * rstd
        g = gy * reshape(self.inputs[1], self.param_shape) if self.has_weight else gy
        g = reshape(g, view)
        gx = g - xhat * (_sum(g * xhat, axis=self.axes, keepdims=True) * inv_n)
        if self.center:
            gx = gx - _sum(g, axis=self.axes, keepdims=True) * inv_n
        gx = reshape(gx * rstd, x.shape)
        grads = self._param_grads(gy, reshape(xhat, x.shape), sum_to, reshape)
        return (gx if self.needs_input_grad[0] else None, *grads)

    def batch_stats(self):
        """(mean, biased variance) of the last call, in the view's keepdims shape."""
        if not self.center:
            raise ValueError("Normalize: RMS normalization has no mean")
        return self.mean, self.var
