"""The INT8 modules ``convert`` produces: they take and return quantized tensors
(``qtensor.QTensor``) and run the integer operators of ``ops.py``.

State (``state_dict``): a quantized layer keeps ``weight`` (int8), ``weight_scale``
(float32) and ``weight_zero_point`` (int8) per output channel, ``bias`` (float32; quantized at run time at
the scale ``s_in * s_w``, which depends on the input), and the output's ``scale`` and
``zero_point``.  The int16 packing of the weight and the fixed-point multipliers are
caches, rebuilt when those arrays are replaced (``load_state_dict``) or the input's
parameters change.  ``from_float`` builds each module from its prepared float twin.
"""
import numpy as np

from lezero import cuda
from lezero.nn import Module
from lezero.quantization import ops
from lezero.quantization.qparams import is_symmetric, qrange
from lezero.quantization.qtensor import expect_quantized, make_qtensor
from lezero.quantization.reference import pack_weight

__all__ = ["QuantModule", "Quantize", "DeQuantize", "QuantLinear", "QuantLinearReLU",
           "QuantConv2d", "QuantConvReLU2d", "QuantReLU", "QuantReLU6", "QuantMaxPool2d",
           "QuantAvgPool2d", "QuantAdaptiveAvgPool2d", "QFunctional", "quantize_weight",
           "output_qparams"]


def output_qparams(observer):
    """``(scale, zero_point, dtype, qmin, qmax)`` of a prepared module's output observer
    (or fake-quantize module)."""
    scale, zp = observer.calculate_qparams()
    return (float(np.asarray(scale).reshape(-1)[0]), int(np.asarray(zp).reshape(-1)[0]),
            observer.dtype, observer.quant_min, observer.quant_max)


class QuantModule(Module):
    """Shared by the modules with an output scale and zero point (buffers ``scale``,
    ``zero_point``) and an output dtype and range (attributes)."""

    def _set_output(self, scale, zero_point, dtype="quint8", quant_min=None, quant_max=None):
        self.register_buffer("scale", np.array(scale, np.float32))
        self.register_buffer("zero_point", np.array(zero_point, np.int32))
        self.dtype = np.dtype(np.uint8 if dtype in ("quint8", "uint8") else
                              np.int8 if dtype in ("qint8", "int8") else dtype)
        self.qrange = qrange(self.dtype, quant_min=quant_min, quant_max=quant_max)

    @property
    def out_qparams(self):
        return float(self.scale), int(self.zero_point)

    def _wrap(self, y, qparams=None):
        scale, zp = qparams if qparams is not None else self.out_qparams
        return make_qtensor(y, scale, zp)


class Quantize(QuantModule):
    """float -> quantized with fixed ``scale``/``zero_point`` (a converted QuantStub)."""

    def __init__(self, scale, zero_point, dtype="quint8", quant_min=None, quant_max=None):
        super().__init__()
        self._set_output(scale, zero_point, dtype, quant_min, quant_max)

    @classmethod
    def from_float(cls, mod):
        scale, zp, dtype, lo, hi = output_qparams(mod.activation_post_process)
        return cls(scale, zp, dtype, lo, hi)

    def forward(self, x):
        from lezero.core import Variable
        from lezero.quantization.qtensor import QuantizationTypeError, describe_module
        data = x.data if isinstance(x, Variable) else x
        if getattr(data, "dtype", np.dtype(np.float32)).kind != "f":
            raise QuantizationTypeError(f"{describe_module(self)} quantizes float tensors, "
                                        f"got {data.dtype}: is this QuantStub one too many?")
        s, z = self.out_qparams
        return self._wrap(ops.QuantizePerTensor(s, z, *self.qrange, self.dtype)(x))

    def extra_repr(self):
        return f"scale={float(self.scale):.6g}, zero_point={int(self.zero_point)}, " \
               f"dtype={self.dtype}"


class DeQuantize(Module):
    """quantized -> float32 (a converted DeQuantStub)."""

    @classmethod
    def from_float(cls, mod):
        return cls()

    def forward(self, x):
        scale, zp = expect_quantized(self, x)
        return ops.DequantizePerTensor(scale, zp)(x)


def quantize_weight(weight, observer):
    """``(w_q, scale, zero_point)``: a float weight quantized with the parameters of
    ``observer`` (per output channel or per tensor), scales and zero points per channel."""
    scale, zp = observer.calculate_qparams()
    scale, zp = np.asarray(cuda.as_numpy(scale), np.float32), np.asarray(zp, np.int32)
    out = weight.shape[0]
    if scale.size == 1:
        scale, zp = np.full(out, scale.reshape(-1)[0], np.float32), np.full(out, zp.reshape(
            -1)[0], np.int32)
    shape = (-1,) + (1,) * (weight.ndim - 1)
    w = np.asarray(cuda.as_numpy(weight), np.float32)
    inv = (np.float32(1.0) / scale).reshape(shape)
    q = np.clip(np.rint(w * inv) + zp.reshape(shape), observer.quant_min, observer.quant_max)
    return q.astype(observer.dtype), scale, zp


def _float_weight(mod):
    """(weight, bias, weight observer) of a prepared float or QAT layer; QAT conv-bn
    layers have their batch norm folded in here."""
    from lezero.quantization.fuse import fold_bn
    from lezero.quantization.qat import QATConvBn2d
    layer = mod[0] if isinstance(mod, Module) and type(mod).__name__ in (
        "ConvReLU2d", "LinearReLU") else mod
    weight = cuda.as_numpy(layer.weight.data)
    bias = None if layer.bias is None else cuda.as_numpy(layer.bias.data)
    if isinstance(mod, QATConvBn2d):
        weight, bias = fold_bn(weight, bias, mod.bn)
    observer = getattr(layer, "weight_fake_quant", None)
    if observer is None:
        observer = mod.qconfig.weight()
        observer(weight)
    elif getattr(observer, "observer_enabled", [0])[0] and isinstance(mod, QATConvBn2d):
        observer(weight)               # PyTorch's convert re-observes the folded weight
    return layer, weight, bias, observer


class _QuantProduct(QuantModule):
    """Shared by QuantLinear and QuantConv2d: weights, caches, the Function call."""

    relu = False

    def _set_weight(self, w_q, w_scale, w_zp, bias, symmetric=True):
        self.register_buffer("weight", w_q)
        self.register_buffer("weight_scale", np.asarray(w_scale, np.float32))
        # Zero points in the weight's own dtype: each lies in its range, one byte apiece.
        # A symmetric scheme's are 0 by definition: the kernels and the ONNX export read
        # them, but they are not saved (the default qconfig is symmetric per channel).
        self.register_buffer("weight_zero_point", np.asarray(w_zp).astype(w_q.dtype),
                             persistent=not symmetric)
        self.register_buffer("bias", None if bias is None else np.asarray(bias, np.float32))
        self._cache_key, self._cache = None, {}

    def _attrs(self, in_qparams):
        """The operator's attributes for this input, cached while the state is unchanged."""
        state = (self.weight, self.weight_scale, self.weight_zero_point, self.bias,
                 self.scale, self.zero_point)
        if self._cache_key is None or any(a is not b for a, b in zip(state, self._cache_key)):
            self._cache_key, self._cache = state, {}
        attrs = self._cache.get(in_qparams)
        if attrs is None:
            w16 = self._cache.get("w16")
            if w16 is None:
                w16 = self._cache["w16"] = pack_weight(self.weight, self.weight_zero_point)
            probe = self._op_class.__new__(self._op_class)
            ops._Product.__init__(probe, self.weight, w16, self.weight_scale,
                                  self.weight_zero_point, self.bias, in_qparams,
                                  self.out_qparams, self.relu, self.dtype, self.qrange)
            probe.packed = self._vnni_packed()
            attrs = self._cache[in_qparams] = dict(vars(probe))
        return attrs

    def _vnni_packed(self):
        """The weights packed once for the VNNI kernels, or None where they do not apply
        (``nhwc.packable``); importing ``nhwc`` compiles nothing until a layer runs."""
        if "packed" not in self._cache:
            from lezero.quantization import nhwc
            self._cache["packed"] = nhwc.pack_conv(self.weight) if nhwc.packable(
                self.weight, self.weight_zero_point, getattr(self, "groups", 1)) else None
        return self._cache["packed"]

    def _call(self, x, **extra):
        in_qparams = expect_quantized(self, x)
        # A fresh Function per call (an instance serves one call), filled with the cached
        # attributes rather than recomputing the multipliers in __init__ (as jit replay).
        f = self._op_class.__new__(self._op_class)
        f.__dict__.update(self._attrs(in_qparams))
        f.__dict__.update(extra)
        return self._wrap(f(x))


class QuantLinear(_QuantProduct):
    """An INT8 Linear: uint8 input x int8 weight -> int32, requantized to uint8."""

    _op_class = ops.QuantizedLinear

    def __init__(self, in_features, out_features, bias=True, dtype="quint8"):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._set_weight(np.zeros((out_features, in_features), np.int8),
                         np.ones(out_features, np.float32), np.zeros(out_features, np.int32),
                         np.zeros(out_features, np.float32) if bias else None)
        self._set_output(1.0, 0, dtype)

    @classmethod
    def from_float(cls, mod):
        layer, weight, bias, observer = _float_weight(mod)
        scale, zp, dtype, lo, hi = output_qparams(mod.activation_post_process)
        new = cls(layer.in_features, layer.out_features, bias is not None, dtype)
        new._set_weight(*quantize_weight(weight, observer), bias,
                        is_symmetric(observer.qscheme))
        new._set_output(scale, zp, dtype, lo, hi)
        return new

    def forward(self, x):
        return self._call(x)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"scale={float(self.scale):.6g}, zero_point={int(self.zero_point)}")


class QuantLinearReLU(QuantLinear):
    """An INT8 Linear with the ReLU fused (the output clamps at the real 0)."""

    relu = True


def _conv_padding(conv):
    if conv.padding == "valid":
        return (0, 0)
    if conv.padding == "same":
        total = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
        if any(t % 2 for t in total):
            raise ValueError(f"QuantConv2d: padding='same' with an even kernel pads "
                             f"unevenly, which the INT8 convolution does not do; got "
                             f"kernel_size={conv.kernel_size}")
        return tuple(t // 2 for t in total)
    return tuple(conv.padding)


class QuantConv2d(_QuantProduct):
    """An INT8 Conv2d (zero padding; any stride, dilation and groups)."""

    _op_class = ops.QuantizedConv2d

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, dtype="quint8"):
        super().__init__()
        pair = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v))
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = pair(kernel_size), pair(stride)
        self.padding, self.dilation = pair(padding), pair(dilation)
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self._set_weight(np.zeros(shape, np.int8), np.ones(out_channels, np.float32),
                         np.zeros(out_channels, np.int32),
                         np.zeros(out_channels, np.float32) if bias else None)
        self._set_output(1.0, 0, dtype)

    @classmethod
    def from_float(cls, mod):
        layer, weight, bias, observer = _float_weight(mod)
        if getattr(layer, "padding_mode", "zeros") != "zeros":
            raise ValueError(f"QuantConv2d: padding_mode {layer.padding_mode!r} is not "
                             "supported (only 'zeros'); keep this layer in float")
        scale, zp, dtype, lo, hi = output_qparams(mod.activation_post_process)
        new = cls(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride,
                  _conv_padding(layer), layer.dilation, layer.groups, bias is not None, dtype)
        new._set_weight(*quantize_weight(weight, observer), bias,
                        is_symmetric(observer.qscheme))
        new._set_output(scale, zp, dtype, lo, hi)
        return new

    def forward(self, x):
        expect_quantized(self, x)
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected input of shape (N, "
                             f"{self.in_channels}, H, W), got {tuple(x.shape)}")
        return self._call(x, stride=self.stride, padding=self.padding,
                          dilation=self.dilation, groups=self.groups,
                          kernel=self.kernel_size)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, scale="
                f"{float(self.scale):.6g}, zero_point={int(self.zero_point)}")


class QuantConvReLU2d(QuantConv2d):
    """An INT8 Conv2d with the ReLU fused."""

    relu = True


class QuantReLU(Module):
    """ReLU on quantized values: ``max(q, z)``; the scale and zero point stay."""

    upper = None

    @classmethod
    def from_float(cls, mod):
        return cls()

    def forward(self, x):
        scale, zp = expect_quantized(self, x)
        upper = None
        if self.upper is not None:
            info = np.iinfo(x.dtype)
            upper = int(np.clip(zp + np.rint(self.upper / scale), info.min, info.max))
        return make_qtensor(ops.QuantizedReLU(zp, upper)(x), scale, zp)


class QuantReLU6(QuantReLU):
    """ReLU6 on quantized values: ``min(max(q, z), z + round(6 / scale))``."""

    upper = 6.0


class _QuantPool(Module):
    """Pooling keeps the input's scale and zero point."""

    _keys = ()

    @classmethod
    def from_float(cls, mod):
        new = cls()
        for key in cls._keys:
            setattr(new, key, getattr(mod, key))
        return new

    def extra_repr(self):
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._keys)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class QuantMaxPool2d(_QuantPool):
    _keys = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")

    def forward(self, x):
        scale, zp = expect_quantized(self, x)
        f = ops.QuantizedMaxPool2d(_pair(self.kernel_size), _pair(self.stride or
                                                                  self.kernel_size),
                                   _pair(self.padding), _pair(self.dilation), self.ceil_mode)
        return make_qtensor(f(x), scale, zp)


class QuantAvgPool2d(_QuantPool):
    _keys = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
             "divisor_override")

    def forward(self, x):
        scale, zp = expect_quantized(self, x)
        f = ops.QuantizedAvgPool2d(_pair(self.kernel_size), _pair(self.stride or
                                                                  self.kernel_size),
                                   _pair(self.padding), self.ceil_mode,
                                   self.count_include_pad, self.divisor_override, zp)
        return make_qtensor(f(x), scale, zp)


class QuantAdaptiveAvgPool2d(_QuantPool):
    _keys = ("output_size",)

    def forward(self, x):
        scale, zp = expect_quantized(self, x)
        size = _pair(self.output_size)
        size = tuple(x.shape[2 + i] if s is None else s for i, s in enumerate(size))
        return make_qtensor(ops.QuantizedAdaptiveAvgPool2d(size)(x), scale, zp)


class QFunctional(QuantModule):
    """The INT8 twin of ``FloatFunctional``: ``add``, ``add_relu``, ``mul``, ``cat`` of
    quantized tensors, written at this module's ``scale`` and ``zero_point``."""

    def __init__(self, scale=1.0, zero_point=0, dtype="quint8", quant_min=None,
                 quant_max=None):
        super().__init__()
        self._set_output(scale, zero_point, dtype, quant_min, quant_max)

    @classmethod
    def from_float(cls, mod):
        return cls(*output_qparams(mod.activation_post_process))

    def forward(self, *args):
        raise RuntimeError("QFunctional is not called directly: use its add, add_relu, mul "
                           "or cat method")

    def _binary(self, op, a, b, relu):
        qa, qb = expect_quantized(self, a), expect_quantized(self, b)
        y = op(qa, qb, self.out_qparams, relu, self.dtype, self.qrange)(a, b)
        return self._wrap(y)

    def add(self, a, b):
        return self._binary(ops.QuantizedAdd, a, b, False)

    def add_relu(self, a, b):
        return self._binary(ops.QuantizedAdd, a, b, True)

    def mul(self, a, b):
        return self._binary(ops.QuantizedMul, a, b, False)

    def cat(self, xs, axis=0):
        xs = list(xs)
        params = [expect_quantized(self, x) for x in xs]
        y = ops.QuantizedCat(axis, params, self.out_qparams, self.dtype, self.qrange)(*xs)
        return self._wrap(y)
