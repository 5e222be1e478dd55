"""The integer operators as ``Function``s: forward on raw integer arrays, so that
``jit.trace`` records them and ``onnx.export`` writes them (``onnx_rules.py``).

Each runs its Numba kernel (``kernels.py``) when ``lezero.kernels.enabled(x)`` says so,
and its NumPy reference (``reference.py``, any backend) otherwise; both give the same
integers.  None is differentiable: these run converted (inference) models.  Every
parameter an operator needs is an attribute set in ``__init__`` (integer weights, their
scales, the fixed-point multipliers), which is what tracing and export read.
"""
import numpy as np

import lezero.kernels
from lezero.core import Function
from lezero.quantization import reference as R
from lezero.quantization.fixed_point import INT32_MAX, INT32_MIN, quantize_multiplier

__all__ = ["QuantizePerTensor", "DequantizePerTensor", "QuantizedLinear", "QuantizedConv2d",
           "QuantizedReLU", "QuantizedMaxPool2d", "QuantizedAvgPool2d",
           "QuantizedAdaptiveAvgPool2d", "QuantizedAdd", "QuantizedMul", "QuantizedCat",
           "requant_params", "add_params"]


def _numba(*arrays):
    return lezero.kernels.enabled(*arrays)


def _kernels():
    from lezero.quantization import kernels
    return kernels


def _nhwc():
    from lezero.quantization import nhwc
    return nhwc


class _IntegerOp(Function):
    def backward(self, *gys):
        raise NotImplementedError(f"{type(self).__name__}: quantized operators run "
                                  "inference only; train with fake quantization "
                                  "(quantization.prepare_qat) and convert afterwards")


class QuantizePerTensor(_IntegerOp):
    """float -> integers: ``clamp(round(x / scale) + zero_point, qmin, qmax)``."""

    def __init__(self, scale, zero_point, qmin, qmax, dtype):
        self.scale, self.zero_point = float(scale), int(zero_point)
        self.qmin, self.qmax, self.dtype = int(qmin), int(qmax), np.dtype(dtype)

    def forward(self, x):
        return R.quantize_ref(x, self.scale, self.zero_point, self.qmin, self.qmax,
                              self.dtype)


class DequantizePerTensor(_IntegerOp):
    """integers -> float32: ``scale * (q - zero_point)``."""

    def __init__(self, scale, zero_point):
        self.scale, self.zero_point = float(scale), int(zero_point)

    def forward(self, q):
        return R.dequantize_ref(q, self.scale, self.zero_point)


def requant_params(in_scale, w_scale, out_scale, bias):
    """``(bias_q int32, m, shift)`` for an int32 accumulator of scale ``in_scale *
    w_scale`` (per output channel) written at ``out_scale``; the bias is quantized at the
    accumulator's scale with zero point 0, as gemmlowp and TFLite do."""
    acc_scale = np.float64(in_scale) * np.asarray(w_scale, np.float64)
    m, shift = quantize_multiplier(acc_scale / np.float64(out_scale))
    if bias is None:
        bias_q = np.zeros(acc_scale.shape, np.int32)
    else:
        bias_q = np.clip(np.rint(np.asarray(bias, np.float64) / acc_scale), INT32_MIN,
                         INT32_MAX).astype(np.int32)
    return bias_q, m, shift


class _Product(_IntegerOp):
    """Shared state of QuantizedLinear and QuantizedConv2d: the int8 weights (and their
    int16 packing), per-channel scales, the requantization, the output range."""

    def __init__(self, weight, w16, w_scale, w_zp, bias, in_qparams, out_qparams, relu,
                 dtype, qrange):
        self.weight, self.w16 = weight, w16
        self.w_scale = np.asarray(w_scale, np.float32)
        self.w_zp = np.asarray(w_zp, np.int32)
        self.bias = None if bias is None else np.asarray(bias, np.float32)
        self.in_scale, self.in_zp = float(in_qparams[0]), int(in_qparams[1])
        self.out_scale, self.out_zp = float(out_qparams[0]), int(out_qparams[1])
        self.bias_q, self.m, self.shift = requant_params(self.in_scale, self.w_scale,
                                                         self.out_scale, self.bias)
        self.relu, self.dtype = bool(relu), np.dtype(dtype)
        self.lo = max(qrange[0], self.out_zp) if relu else int(qrange[0])
        self.hi = int(qrange[1])
        self.packed = None          # the VNNI packing, set by the module that caches it

    def _vnni(self, x, groups=1):
        """The weights packed for ``nhwc`` when its fast path applies to ``x``, else None."""
        if not (_numba(x) and _nhwc().usable(x, self.weight, self.w_zp, groups)):
            return None
        if self.packed is None:
            self.packed = _nhwc().pack_conv(self.weight)
        return self.packed

    def _requant_args(self):
        return (self.bias_q, self.m, self.shift, self.out_zp, self.lo, self.hi, self.dtype)


class QuantizedLinear(_Product):
    """``y = requant(x @ W.T + b)`` on (..., in_features) integers."""

    def forward(self, x):
        k = x.shape[-1]
        if k > R.MAX_K:
            raise ValueError(f"QuantizedLinear: {k} input features exceed the {R.MAX_K} "
                             "an int32 accumulator holds without overflow")
        packed = self._vnni(x)
        if packed is not None:
            y = _nhwc().linear(x.reshape(-1, k), self.in_zp, packed, *self._requant_args())
            return y.reshape(x.shape[:-1] + (y.shape[1],))
        a = x.reshape(-1, k).astype(np.int16) - np.int16(self.in_zp)
        if _numba(x):
            y = _kernels().gemm_requant(a, self.w16, self.bias_q, self.m, self.shift,
                                        self.out_zp, self.lo, self.hi, self.dtype)
        else:
            y = R.requantize_ref(R.gemm_ref(a, self.w16), self.bias_q, self.m, self.shift,
                                 self.out_zp, self.lo, self.hi, 1, self.dtype)
        return y.reshape(x.shape[:-1] + (self.w16.shape[0],))


class QuantizedConv2d(_Product):
    """A 2-D convolution of (N, C, H, W) integers: patches gathered as int16 (zero point
    subtracted), one product per output channel group, requantized per channel."""

    def __init__(self, weight, w16, w_scale, w_zp, bias, in_qparams, out_qparams, relu,
                 dtype, qrange, stride, padding, dilation, groups):
        super().__init__(weight, w16, w_scale, w_zp, bias, in_qparams, out_qparams, relu,
                         dtype, qrange)
        self.kernel = tuple(int(k) for k in weight.shape[2:])
        self.stride, self.padding = tuple(stride), tuple(padding)
        self.dilation, self.groups = tuple(dilation), int(groups)

    def forward(self, x):
        n, c, h, w = x.shape
        geo = R.geometry((h, w), self.kernel, self.stride, self.padding, self.dilation)
        o, g = self.w16.shape[0], self.groups
        cin, cout = c // g, o // g
        if cin * self.kernel[0] * self.kernel[1] > R.MAX_K:
            raise ValueError(f"QuantizedConv2d: a reduction of {self.w16.shape[1]} terms "
                             f"exceeds the {R.MAX_K} an int32 accumulator holds")
        packed = self._vnni(x, g)
        if packed is not None:
            return _nhwc().conv2d(x, self.in_zp, geo, packed, *self._requant_args())
        use_numba = _numba(x)
        out = np.empty((n, o, geo[8] * geo[9]), self.dtype) if g > 1 else None
        for k in range(g):
            xg = x if g == 1 else x[:, k * cin:(k + 1) * cin]
            ch = slice(k * cout, (k + 1) * cout)
            args = (self.w16[ch], self.bias_q[ch], self.m[ch], self.shift[ch], self.out_zp,
                    self.lo, self.hi)
            if use_numba:
                y = _kernels().conv2d(xg, self.in_zp, geo, *args, self.dtype)
            else:
                acc = R.conv_acc_ref(R.im2col_ref(xg, self.in_zp, geo), args[0])
                y = R.requantize_ref(acc, *args[1:], 1, self.dtype)
            if g == 1:
                out = y
            else:
                out[:, ch] = y
        return out.reshape(n, o, geo[8], geo[9])


class QuantizedReLU(_IntegerOp):
    """``max(q, z)`` (the real 0), and ``min(., q6)`` for ReLU6; the parameters stay."""

    def __init__(self, zero_point, upper=None):
        self.zero_point = int(zero_point)
        self.upper = None if upper is None else int(upper)

    def forward(self, q):
        from lezero import cuda
        xp = cuda.get_array_module(q)
        y = xp.maximum(q, q.dtype.type(self.zero_point))
        return y if self.upper is None else xp.minimum(y, q.dtype.type(self.upper))


class QuantizedMaxPool2d(_IntegerOp):
    """Max pooling on the integers themselves (the map q -> real is increasing)."""

    def __init__(self, kernel_size, stride, padding, dilation, ceil_mode):
        self.kernel_size, self.stride = tuple(kernel_size), tuple(stride)
        self.padding, self.dilation = tuple(padding), tuple(dilation)
        self.ceil_mode = bool(ceil_mode)

    def forward(self, q):
        geo = R.geometry(q.shape[2:], self.kernel_size, self.stride, self.padding,
                         self.dilation, self.ceil_mode)
        if not _numba(q):
            return R.max_pool_ref(q, geo)
        if q.dtype == np.uint8 and _nhwc().is_nhwc(q):
            return _nhwc().max_pool(q, geo)         # keeps the layout the convolutions left
        return _kernels().max_pool(q, geo)


class QuantizedAvgPool2d(_IntegerOp):
    """Average pooling in integers: rounded means, the input's scale and zero point."""

    def __init__(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override, zero_point):
        self.kernel_size, self.stride = tuple(kernel_size), tuple(stride)
        self.padding, self.ceil_mode = tuple(padding), bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)
        self.divisor_override = divisor_override
        self.zero_point = int(zero_point)

    def forward(self, q):
        geo = R.geometry(q.shape[2:], self.kernel_size, self.stride, self.padding,
                         (1, 1), self.ceil_mode)
        args = (q, geo, self.zero_point, self.count_include_pad, self.divisor_override)
        return _kernels().avg_pool(*args) if _numba(q) else R.avg_pool_ref(*args)


class QuantizedAdaptiveAvgPool2d(_IntegerOp):
    """Adaptive average pooling in integers (PyTorch's windows, rounded means)."""

    def __init__(self, output_size):
        self.output_size = tuple(int(s) for s in output_size)

    def forward(self, q):
        if _numba(q):
            return _kernels().adaptive_avg_pool(q, self.output_size)
        return R.adaptive_avg_pool_ref(q, self.output_size)


def add_params(a_qparams, b_qparams, out_qparams, left_shift=20):
    """TFLite's addition parameters: both inputs are brought to the scale
    ``2 max(sa, sb) / 2**left_shift`` and the sum to the output's."""
    (sa, za), (sb, zb), (sy, zy) = a_qparams, b_qparams, out_qparams
    twice_max = 2.0 * max(sa, sb)
    ma, sha = quantize_multiplier(sa / twice_max)
    mb, shb = quantize_multiplier(sb / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * sy))
    return (int(za), int(ma), int(sha), int(zb), int(mb), int(shb), int(mo), int(sho),
            int(zy), int(left_shift))


def _same_shape(a, b, where):
    if a.shape == b.shape:
        return a, b
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"{where}: shapes {a.shape} and {b.shape} do not broadcast") \
            from None
    from lezero import cuda
    xp = cuda.get_array_module(a)
    return (xp.ascontiguousarray(xp.broadcast_to(a, shape)),
            xp.ascontiguousarray(xp.broadcast_to(b, shape)))


class _Binary(_IntegerOp):
    def __init__(self, a_qparams, b_qparams, out_qparams, relu, dtype, qrange):
        self.a_qparams, self.b_qparams = tuple(a_qparams), tuple(b_qparams)
        self.out_qparams = tuple(out_qparams)
        self.relu, self.dtype = bool(relu), np.dtype(dtype)
        self.lo = max(qrange[0], int(out_qparams[1])) if relu else int(qrange[0])
        self.hi = int(qrange[1])


class QuantizedAdd(_Binary):
    """``a + b`` (and ReLU) of quantized tensors, in integers (TFLite's method)."""

    def __init__(self, a_qparams, b_qparams, out_qparams, relu, dtype, qrange):
        super().__init__(a_qparams, b_qparams, out_qparams, relu, dtype, qrange)
        self.params = add_params(self.a_qparams, self.b_qparams, self.out_qparams)

    def forward(self, a, b):
        a, b = _same_shape(a, b, "QuantizedAdd")
        args = (a, b, self.params, self.lo, self.hi, self.dtype)
        return _kernels().add(*args) if _numba(a, b) else R.add_ref(*args)


class QuantizedMul(_Binary):
    """``a * b`` of quantized tensors: the integer product, requantized."""

    def __init__(self, a_qparams, b_qparams, out_qparams, relu, dtype, qrange):
        super().__init__(a_qparams, b_qparams, out_qparams, relu, dtype, qrange)
        m, s = quantize_multiplier(self.a_qparams[0] * self.b_qparams[0]
                                   / self.out_qparams[0])
        self.params = (int(self.a_qparams[1]), int(self.b_qparams[1]), int(m), int(s),
                       int(self.out_qparams[1]))

    def forward(self, a, b):
        a, b = _same_shape(a, b, "QuantizedMul")
        args = (a, b, self.params, self.lo, self.hi, self.dtype)
        return _kernels().mul(*args) if _numba(a, b) else R.mul_ref(*args)


class QuantizedCat(_IntegerOp):
    """Concatenation along ``axis``: each input moved to the output's parameters."""

    def __init__(self, axis, in_qparams, out_qparams, dtype, qrange):
        self.axis = int(axis)
        self.in_qparams = [tuple(p) for p in in_qparams]
        self.out_qparams, self.dtype = tuple(out_qparams), np.dtype(dtype)
        self.qrange = tuple(qrange)
        self.rescales = [tuple(int(v) for v in quantize_multiplier(s / self.out_qparams[0]))
                         for s, _ in self.in_qparams]

    def forward(self, *xs):
        from lezero import cuda
        xp = cuda.get_array_module(xs[0])
        zy, (lo, hi) = self.out_qparams[1], self.qrange
        parts = []
        for x, (s, zx), (m, shift) in zip(xs, self.in_qparams, self.rescales):
            if (s, zx) == self.out_qparams:
                parts.append(x)
            elif _numba(x):
                parts.append(_kernels().rescale(x, zx, m, shift, zy, lo, hi, self.dtype))
            else:
                parts.append(R.rescale_ref(x, zx, m, shift, zy, lo, hi, self.dtype))
        return xp.concatenate(parts, axis=self.axis)
