"""Observers: modules that watch the values passing through and turn their range into a
scale and zero point (``calculate_qparams``), with ``torch.ao.quantization``'s names,
arguments and arithmetic (the tests compare the parameters with PyTorch's).

An observer returns its input unchanged.  Ranges are buffers (``min_val``, ``max_val``),
so they are part of a prepared model's ``state_dict``.

    MinMaxObserver                       running min and max
    MovingAverageMinMaxObserver          exponential moving averages of each batch's
                                         min and max (``averaging_constant``)
    PerChannelMinMaxObserver             min and max per slice along ``ch_axis``
    MovingAveragePerChannelMinMaxObserver
    HistogramObserver                    a histogram of the values; the range is cut by a
                                         percentile or by minimal KL divergence (entropy)

``Observer.with_args(**kwargs)`` makes a factory with bound arguments (as PyTorch's), the
form a ``QConfig`` holds.
"""
import functools

import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.nn import Module
from lezero.quantization.qparams import (EPS, QSCHEMES, as_qdtype, calculate_qparams,
                                         is_per_channel, qrange)
from lezero.utils.checks import check_bool, check_choice, check_int, check_number

__all__ = ["ObserverBase", "MinMaxObserver", "MovingAverageMinMaxObserver",
           "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver",
           "HistogramObserver", "PlaceholderObserver"]


def _array(x):
    return x.data if isinstance(x, Variable) else x


def _f32(v):
    """A float32 array (buffers must be arrays; NumPy reductions give scalars)."""
    return cuda.get_array_module(v).asarray(v, dtype=np.float32)


class ObserverBase(Module):
    """Shared arguments: ``dtype`` ("quint8" or "qint8"), ``qscheme`` (see
    ``qparams.QSCHEMES``), ``reduce_range``, ``quant_min``/``quant_max``, ``eps``."""

    per_channel = False

    def __init__(self, dtype="quint8", qscheme="per_tensor_affine", reduce_range=False,
                 quant_min=None, quant_max=None, eps=EPS):
        super().__init__()
        where = type(self).__name__
        self.dtype = as_qdtype(dtype, where)
        check_choice(where, "qscheme", qscheme, QSCHEMES)
        if is_per_channel(qscheme) != self.per_channel:
            kind = "per-channel" if self.per_channel else "per-tensor"
            raise ValueError(f"{where}: a {kind} observer needs a "
                             f"{'per_channel' if self.per_channel else 'per_tensor'}_* "
                             f"qscheme, got {qscheme!r}")
        self.qscheme = qscheme
        self.reduce_range = check_bool(where, "reduce_range", reduce_range)
        self.quant_min, self.quant_max = qrange(self.dtype, reduce_range, quant_min,
                                                quant_max, where)
        self.custom_range = quant_min is not None
        self.eps = check_number(where, "eps", eps, low=0.0, low_open=True)

    @classmethod
    def with_args(cls, **kwargs):
        """A factory ``() -> cls(**kwargs)`` (PyTorch's ``with_args``)."""
        factory = functools.partial(cls, **kwargs)
        factory.__name__ = cls.__name__
        return factory

    def forward(self, x):
        data = _array(x)
        if not isinstance(data, cuda.array_types()) or data.dtype.kind != "f":
            raise TypeError(f"{type(self).__name__}: observes float tensors, got "
                            f"{getattr(data, 'dtype', type(x).__name__)}")
        if data.size:
            self._observe(data)
        return x

    def has_data(self):
        """Whether any value has been observed (no data gives scale 1, zero point 0)."""
        return bool(np.all(np.isfinite(cuda.as_numpy(self.min_val)))) and \
            self.min_val.size > 0

    def _average(self, lo, hi, first):
        """Moving averages of the range (``averaging_constant``); the first batch sets it."""
        if first:
            self.min_val, self.max_val = lo, hi
            return
        c = np.float32(self.averaging_constant)
        self.min_val = _f32(self.min_val + c * (lo - self.min_val))
        self.max_val = _f32(self.max_val + c * (hi - self.max_val))

    def calculate_qparams(self):
        """``(scale float32 array, zero_point int32 array)``; of shape (1,) per tensor,
        (channels,) per channel, as PyTorch returns them."""
        if not self.has_data():
            shape = (max(self.min_val.size, 1),) if self.per_channel else (1,)
            return np.ones(shape, np.float32), np.zeros(shape, np.int32)
        scale, zp = calculate_qparams(self.min_val, self.max_val, self.quant_min,
                                      self.quant_max, self.qscheme, self.dtype,
                                      self.custom_range, self.eps)
        return scale.reshape(-1), zp.reshape(-1)

    def extra_repr(self):
        return (f"dtype={self.dtype}, qscheme={self.qscheme}, range=[{self.quant_min}, "
                f"{self.quant_max}], min_val={_fmt(self.min_val)}, "
                f"max_val={_fmt(self.max_val)}")


def _fmt(a):
    a = cuda.as_numpy(a)
    return f"{float(a):.4g}" if a.ndim == 0 else f"<{a.size} channels>"


class MinMaxObserver(ObserverBase):
    """The running minimum and maximum of everything seen."""

    def __init__(self, dtype="quint8", qscheme="per_tensor_affine", reduce_range=False,
                 quant_min=None, quant_max=None, eps=EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.register_buffer("min_val", np.array(np.inf, np.float32))
        self.register_buffer("max_val", np.array(-np.inf, np.float32))

    def _observe(self, x):
        xp = cuda.get_array_module(x)
        self.min_val = _f32(xp.minimum(_f32(x.min()), self.min_val))
        self.max_val = _f32(xp.maximum(_f32(x.max()), self.max_val))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """min <- min + c (batch min - min) (and max alike); the first batch sets them."""

    def __init__(self, averaging_constant=0.01, dtype="quint8", qscheme="per_tensor_affine",
                 reduce_range=False, quant_min=None, quant_max=None, eps=EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.averaging_constant = check_number(type(self).__name__, "averaging_constant",
                                               averaging_constant, low=0.0, high=1.0)

    def _observe(self, x):
        self._average(_f32(x.min()), _f32(x.max()), first=not self.has_data())


class PerChannelMinMaxObserver(ObserverBase):
    """Min and max of each slice along ``ch_axis`` (weights: axis 0, output channels)."""

    per_channel = True

    def __init__(self, ch_axis=0, dtype="quint8", qscheme="per_channel_affine",
                 reduce_range=False, quant_min=None, quant_max=None, eps=EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.ch_axis = check_int(type(self).__name__, "ch_axis", ch_axis)
        self.register_buffer("min_val", np.zeros(0, np.float32))
        self.register_buffer("max_val", np.zeros(0, np.float32))

    def _channel_range(self, x):
        xp = cuda.get_array_module(x)
        axis = self.ch_axis % x.ndim
        rows = xp.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
        return rows.min(axis=1).astype(np.float32), rows.max(axis=1).astype(np.float32)

    def _check_channels(self, lo):
        if self.min_val.size and self.min_val.shape != lo.shape:
            raise ValueError(f"{type(self).__name__}: observed {lo.size} channels along "
                             f"axis {self.ch_axis}, earlier {self.min_val.size}")

    def _observe(self, x):
        xp = cuda.get_array_module(x)
        lo, hi = self._channel_range(x)
        self._check_channels(lo)
        if self.min_val.size:
            lo, hi = xp.minimum(lo, self.min_val), xp.maximum(hi, self.max_val)
        self.min_val, self.max_val = lo, hi


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Per-channel moving averages of min and max."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype="quint8",
                 qscheme="per_channel_affine", reduce_range=False, quant_min=None,
                 quant_max=None, eps=EPS):
        super().__init__(ch_axis, dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.averaging_constant = check_number(type(self).__name__, "averaging_constant",
                                               averaging_constant, low=0.0, high=1.0)

    def _observe(self, x):
        lo, hi = self._channel_range(x)
        self._check_channels(lo)
        self._average(lo, hi, first=not self.min_val.size)


class PlaceholderObserver(MinMaxObserver):
    """Records nothing and yields scale 1, zero point 0 (a stand-in)."""

    def _observe(self, x):
        pass


class HistogramObserver(MinMaxObserver):
    """A histogram of the values (``bins`` bins over the running [min, max]; when the
    range grows, old counts move to the new bins).  ``calculate_qparams`` cuts the range:

    * ``method="percentile"``: keep the central ``percentile`` per cent of the mass;
    * ``method="entropy"``: the threshold whose 256-level quantized histogram is closest
      in KL divergence to the original (TensorRT's calibration), on |x| for signed data
      and on x for non-negative data.

    This is not PyTorch's HistogramObserver (which minimises an L2 error); it is the
    calibration most INT8 toolkits call "percentile" and "entropy"."""

    def __init__(self, bins=2048, method="percentile", percentile=99.99, dtype="quint8",
                 qscheme="per_tensor_affine", reduce_range=False, quant_min=None,
                 quant_max=None, eps=EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        where = type(self).__name__
        self.bins = check_int(where, "bins", bins, low=256)
        self.method = check_choice(where, "method", method, ("percentile", "entropy"))
        self.percentile = check_number(where, "percentile", percentile, low=50.0,
                                       high=100.0)
        self.register_buffer("histogram", np.zeros(self.bins, np.float64))

    def _observe(self, x):
        x = cuda.as_numpy(x).astype(np.float64, copy=False).reshape(-1)
        lo, hi = float(x.min()), float(x.max())
        if self.has_data():
            old_lo, old_hi = float(self.min_val), float(self.max_val)
            new_lo, new_hi = min(lo, old_lo), max(hi, old_hi)
            if (new_lo, new_hi) != (old_lo, old_hi):
                centers = old_lo + (np.arange(self.bins) + 0.5) * (old_hi - old_lo) / self.bins
                self.histogram = np.histogram(centers, self.bins, (new_lo, new_hi),
                                              weights=self.histogram)[0]
            lo, hi = new_lo, new_hi
        if hi == lo:
            hi = lo + 1e-8
        self.histogram = self.histogram + np.histogram(x, self.bins, (lo, hi))[0]
        self.min_val, self.max_val = _f32(lo), _f32(hi)

    def _edges(self):
        return np.linspace(float(self.min_val), float(self.max_val), self.bins + 1)

    def _percentile_range(self):
        cdf = np.cumsum(self.histogram) / self.histogram.sum()
        tail = (1 - self.percentile / 100) / 2
        edges = self._edges()
        lo = edges[int(np.searchsorted(cdf, tail, side="left"))]
        hi = edges[int(np.searchsorted(cdf, 1 - tail, side="left")) + 1]
        return lo, hi

    def _entropy_range(self):
        lo, hi = float(self.min_val), float(self.max_val)
        if lo >= 0:                              # one-sided: cut the upper tail
            return lo, _kl_threshold(self.histogram, self._edges()[1:])
        # signed: a symmetric threshold on |x|
        width = max(-lo, hi)
        edges = self._edges()
        centers = (edges[:-1] + edges[1:]) / 2
        folded = np.histogram(np.abs(centers), self.bins, (0, width),
                              weights=self.histogram)[0]
        t = _kl_threshold(folded, np.linspace(0, width, self.bins + 1)[1:])
        return max(lo, -t), min(hi, t)

    def calculate_qparams(self):
        if not self.has_data() or self.histogram.sum() == 0:
            return super().calculate_qparams()
        lo, hi = (self._percentile_range() if self.method == "percentile"
                  else self._entropy_range())
        scale, zp = calculate_qparams(np.float32(lo), np.float32(hi), self.quant_min,
                                      self.quant_max, self.qscheme, self.dtype,
                                      self.custom_range, self.eps)
        return scale.reshape(-1), zp.reshape(-1)


def _kl_threshold(hist, upper_edges, levels=256, step=8):
    """The upper edge (of ``hist``'s bins) minimising KL(P || Q), where P is the
    histogram clipped there (outliers folded into the last bin) and Q is P merged into
    ``levels`` groups and spread back over the bins that were non-empty."""
    n = len(hist)
    best, best_i = np.inf, n
    for i in range(min(levels, n), n + 1, step):
        p = hist[:i].astype(np.float64).copy()
        p[-1] += hist[i:].sum()
        groups = np.array_split(np.arange(i), levels)
        q = np.zeros(i)
        for g in groups:
            nonzero = p[g] > 0
            if nonzero.any():
                q[g[nonzero]] = p[g].sum() / nonzero.sum()
        mask = p > 0
        ps, qs = p[mask] / p.sum(), q[mask] / q.sum()
        kl = float(np.sum(ps * np.log(ps / np.maximum(qs, 1e-12))))
        if kl < best:
            best, best_i = kl, i
    return float(upper_edges[best_i - 1])
