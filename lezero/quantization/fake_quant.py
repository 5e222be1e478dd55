"""Fake quantization for quantization-aware training: round to the integer grid and back
in float, with gradients that let training adapt to the rounding.

``FakeQuantizeAffine`` (the operator) computes, as ``torch.fake_quantize_per_tensor_affine``
and ``_per_channel_affine`` do,

    q = round_half_even(x * (1 / scale)) + z,   y = (clamp(q, qmin, qmax) - z) * scale

(in the input's precision: float32 as PyTorch; float64 inputs stay float64)
and passes the gradient straight through where ``qmin <= q <= qmax`` (zero outside: the
straight-through estimator clipped to the range).  ``FakeQuantizeLearnable`` also
differentiates the scale and zero point (LSQ, Esser et al. 2020; PyTorch's
``_fake_quantize_learnable_per_tensor_affine``):

    d y / d scale = round(x / s) - x / s  inside,  qmin - z below,  qmax - z above
    d y / d z     = 0 inside,  -s outside

each multiplied by ``grad_factor`` (LSQ's 1 / sqrt(numel * qmax)).

The modules: ``FakeQuantize`` (an observer sets scale and zero point, PyTorch's class and
buffers) and ``LearnableFakeQuantize`` (scale and zero point are Parameters, started
from the observer).  ``enable_observer`` / ``disable_observer`` / ``enable_fake_quant`` /
``disable_fake_quant`` switch every fake-quantize module inside a model.
"""
import math

import numpy as np

from lezero import cuda
from lezero.core import Function, Parameter, Variable
from lezero.nn import Module
from lezero.quantization.observers import MovingAverageMinMaxObserver, ObserverBase
from lezero.quantization.qparams import is_per_channel, is_symmetric
from lezero.utils.checks import check_bool, check_int

__all__ = ["FakeQuantizeAffine", "FakeQuantizeLearnable", "fake_quantize", "FakeQuantizeBase",
           "FakeQuantize", "LearnableFakeQuantize", "enable_observer", "disable_observer",
           "enable_fake_quant", "disable_fake_quant"]


def _channel_shape(ndim, axis):
    shape = [1] * ndim
    if axis is not None:
        shape[axis % ndim] = -1
    return shape


def _grid(x, scale, zero_point, axis):
    """``q = round(x / scale) + z`` in float32 with ``scale``/``z`` broadcast along
    ``axis`` (None: per tensor)."""
    shape = _channel_shape(x.ndim, axis)
    xp = cuda.get_array_module(x)
    s = xp.asarray(scale, dtype=x.dtype).reshape(shape)
    z = xp.asarray(zero_point, dtype=x.dtype).reshape(shape)
    inv = x.dtype.type(1.0) / s
    return xp.rint(x * inv) + z, s, z, inv


class FakeQuantizeAffine(Function):
    """Fake quantization with fixed parameters; straight-through gradient inside the
    range.  ``axis=None`` is per tensor; else ``scale``/``zero_point`` are per slice."""

    def __init__(self, scale, zero_point, quant_min, quant_max, axis=None):
        self.scale = np.asarray(cuda.as_numpy(scale), np.float32)
        self.zero_point = np.asarray(cuda.as_numpy(zero_point), np.int32)
        self.quant_min, self.quant_max = int(quant_min), int(quant_max)
        self.axis = None if axis is None else int(axis)

    def forward(self, x):
        xp = cuda.get_array_module(x)
        q, s, z, _ = _grid(x, xp.asarray(self.scale), xp.asarray(self.zero_point), self.axis)
        self.mask = (q >= self.quant_min) & (q <= self.quant_max)
        return ((xp.clip(q, self.quant_min, self.quant_max) - z) * s).astype(x.dtype)

    def backward(self, gy):
        return gy * self.mask.astype(gy.dtype)


class FakeQuantizeLearnable(Function):
    """Fake quantization of ``x`` by the Variables ``scale`` and ``zero_point`` (one
    entry, or one per slice along ``axis``), differentiable in all three (LSQ)."""

    def __init__(self, quant_min, quant_max, grad_factor=1.0, axis=None):
        self.quant_min, self.quant_max = int(quant_min), int(quant_max)
        self.grad_factor, self.axis = float(grad_factor), None if axis is None else int(axis)

    def forward(self, x, scale, zero_point):
        xp = cuda.get_array_module(x)
        lo, hi = self.quant_min, self.quant_max
        zp = xp.clip(xp.rint(zero_point.astype(x.dtype)), lo, hi)
        q, s, z, inv = _grid(x, scale, zp, self.axis)
        self.saved = (x, q, s, z, inv)
        return ((xp.clip(q, lo, hi) - z) * s).astype(x.dtype)

    def backward(self, gy):
        x, q, s, z, inv = self.saved
        xp = cuda.get_array_module(x)
        g = gy.data
        lo, hi = self.quant_min, self.quant_max
        below, above = q < lo, q > hi
        inside = ~(below | above)
        dscale = xp.where(below, lo - z, xp.where(above, hi - z, ((q - z) * s - x) * inv))
        dzp = xp.where(inside, x.dtype.type(0), -s)
        axes = tuple(i for i in range(x.ndim)
                     if self.axis is None or i != self.axis % x.ndim)
        f = x.dtype.type(self.grad_factor)
        gs = (g * dscale).sum(axis=axes) * f
        gz = (g * dzp).sum(axis=axes) * f
        shape_s, shape_z = self.inputs[1].shape, self.inputs[2].shape
        dtypes = self.inputs[1].dtype, self.inputs[2].dtype
        return (gy * inside.astype(g.dtype), gs.reshape(shape_s).astype(dtypes[0]),
                gz.reshape(shape_z).astype(dtypes[1]))


def fake_quantize(x, scale, zero_point, quant_min, quant_max, axis=None):
    """``FakeQuantizeAffine`` as a function (``torch.fake_quantize_per_tensor_affine``
    for ``axis=None``, ``..._per_channel_affine`` otherwise)."""
    return FakeQuantizeAffine(scale, zero_point, quant_min, quant_max, axis)(x)


class FakeQuantizeBase(Module):
    """Shared switches: ``fake_quant_enabled`` and ``observer_enabled`` buffers."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", np.array([1], np.uint8))
        self.register_buffer("observer_enabled", np.array([1], np.uint8))

    @classmethod
    def with_args(cls, **kwargs):
        return ObserverBase.with_args.__func__(cls, **kwargs)

    def _switch(self, flag, enabled):
        flag[0] = 1 if check_bool(type(self).__name__, "enabled", enabled) else 0
        return self

    def enable_fake_quant(self, enabled=True):
        return self._switch(self.fake_quant_enabled, enabled)

    def disable_fake_quant(self):
        return self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        return self._switch(self.observer_enabled, enabled)

    def disable_observer(self):
        return self.enable_observer(False)

    def _copy_observer_settings(self, observer):
        self.activation_post_process = observer
        self.quant_min, self.quant_max = observer.quant_min, observer.quant_max
        self.dtype, self.qscheme = observer.dtype, observer.qscheme
        self.ch_axis = getattr(observer, "ch_axis", None) if observer.per_channel else None

    @property
    def axis(self):
        return self.ch_axis if is_per_channel(self.qscheme) else None


class FakeQuantize(FakeQuantizeBase):
    """PyTorch's ``FakeQuantize``: while ``observer_enabled``, each call observes ``x``
    and refreshes ``scale``/``zero_point``; while ``fake_quant_enabled``, ``x`` is fake
    quantized with them.  ``observer``: an observer class or factory, built with
    ``quant_min``/``quant_max`` (when given) and ``observer_kwargs``."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 **observer_kwargs):
        super().__init__()
        if quant_min is not None or quant_max is not None:
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        self._copy_observer_settings(observer(**observer_kwargs))
        self.register_buffer("scale", np.array([1.0], np.float32))
        self.register_buffer("zero_point", np.array([0], np.int32))

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, x):
        if self.observer_enabled[0]:
            self.activation_post_process(x)
            self.scale, self.zero_point = self.calculate_qparams()
        if self.fake_quant_enabled[0]:
            x = FakeQuantizeAffine(self.scale, self.zero_point, self.quant_min,
                                   self.quant_max, self.axis)(x)
        return x

    def extra_repr(self):
        return (f"fake_quant_enabled={int(self.fake_quant_enabled[0])}, observer_enabled="
                f"{int(self.observer_enabled[0])}, range=[{self.quant_min}, "
                f"{self.quant_max}], qscheme={self.qscheme}")


class LearnableFakeQuantize(FakeQuantizeBase):
    """LSQ: ``scale`` and ``zero_point`` are Parameters trained with the model.

    The first ``init_steps`` calls (while ``observer_enabled``) set them from the
    observer, as PyTorch's ``_LearnableFakeQuantize`` in its static-estimate phase;
    then the observer switches off and they learn.  ``use_grad_scaling``: LSQ's gradient
    factor 1 / sqrt(numel * qmax).  Symmetric schemes keep the zero point at 0 (or 128)."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 scale=1.0, zero_point=0.0, use_grad_scaling=True, init_steps=1,
                 **observer_kwargs):
        super().__init__()
        if quant_min is not None or quant_max is not None:
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        self._copy_observer_settings(observer(**observer_kwargs))
        self.use_grad_scaling = check_bool("LearnableFakeQuantize", "use_grad_scaling",
                                           use_grad_scaling)
        self.init_steps = check_int("LearnableFakeQuantize", "init_steps", init_steps, low=0)
        self.steps = 0
        self.scale = Parameter(np.array([scale], np.float32))
        self.zero_point = Parameter(np.array([zero_point], np.float32))

    def calculate_qparams(self):
        """The learned scale (at least ``eps``: a step can push it below) and the zero
        point rounded into the range."""
        xp = cuda.get_array_module(self.scale.data)
        zp = xp.clip(xp.rint(self.zero_point.data), self.quant_min, self.quant_max)
        scale = xp.maximum(self.scale.data, np.float32(self.activation_post_process.eps))
        return scale.astype(np.float32), zp.astype(np.int32)

    def enable_param_learning(self):
        """Stop observing; scale and zero point learn from here on."""
        return self.disable_observer()

    def enable_static_estimate(self):
        """Observe again, resetting scale and zero point from the observer each call."""
        self.steps = 0
        self.init_steps = max(self.init_steps, 1 << 62)
        return self.enable_observer()

    def forward(self, x):
        if self.observer_enabled[0] and self.steps < self.init_steps:
            self.activation_post_process(x)
            scale, zp = self.activation_post_process.calculate_qparams()
            self.scale.data = scale.astype(np.float32)
            self.zero_point.data = zp.astype(np.float32)
            self.steps += 1
            if self.steps >= self.init_steps:
                self.disable_observer()
        else:                           # as PyTorch: a learned scale stays >= eps
            xp = cuda.get_array_module(self.scale.data)
            self.scale.data = xp.maximum(self.scale.data,
                                         np.float32(self.activation_post_process.eps))
        if not self.fake_quant_enabled[0]:
            return x
        # A symmetric scheme keeps its zero point: passed as a constant, it gets no gradient.
        zp = self.zero_point.data if is_symmetric(self.qscheme) else self.zero_point
        n = x.size if isinstance(x, Variable) else np.size(x)
        factor = 1.0 / math.sqrt(n * self.quant_max) if self.use_grad_scaling else 1.0
        return FakeQuantizeLearnable(self.quant_min, self.quant_max, factor,
                                     self.axis)(x, self.scale, zp)


def _switch(method, *args):
    def apply(module):
        for m in module.modules():
            if isinstance(m, FakeQuantizeBase):
                getattr(m, method)(*args)
        return module
    apply.__name__ = method
    apply.__doc__ = (f"Call ``{method}()`` on every fake-quantize module inside ``module`` "
                     "(also usable as ``model.apply(...)``); returns ``module``.")
    return apply


enable_observer = _switch("enable_observer")
disable_observer = _switch("disable_observer")
enable_fake_quant = _switch("enable_fake_quant")
disable_fake_quant = _switch("disable_fake_quant")
