"""Quantized tensors: integer Variables that know their scale and zero point.

A quantized activation is an ordinary ``Variable`` holding uint8 (or int8) data; its
``(scale, zero_point)`` are kept in a table keyed by the array that owns the data (the
root of ``array.base``).  So views made by ordinary LeZero operators -- ``F.flatten``,
``x.reshape``, ``x.transpose``, slicing -- keep their quantization parameters, while any
operator that computes new integers (a float operator applied by mistake) yields a tensor
the quantized modules refuse, with a message saying what to do.

The quantized operators return ``QTensor``: the same Variable with a class that shows the
parameters in its ``repr`` and has ``dequantize()``, ``int_repr()``, ``q_scale()`` and
``q_zero_point()`` (PyTorch's names).  Arithmetic on it raises: use ``FloatFunctional``.
"""
import collections
import weakref

import numpy as np

from lezero import cuda
from lezero.core import Variable

__all__ = ["QTensor", "QuantizationTypeError", "make_qtensor", "qparams_of", "is_quantized",
           "describe_module", "expect_quantized", "refuse_quantized"]


class QuantizationTypeError(TypeError):
    """A float tensor reached a quantized layer, or a quantized tensor a float layer."""


_TABLE = {}          # id(root array) -> (weakref to the root, scale, zero_point)


def _root(a):
    while getattr(a, "base", None) is not None and isinstance(a.base, type(a)):
        a = a.base
    return a


def _forget(key):
    def callback(_ref):
        _TABLE.pop(key, None)
    return callback


def _register(data, scale, zero_point):
    root = _root(data)
    key = id(root)
    _TABLE[key] = (weakref.ref(root, _forget(key)), float(scale), int(zero_point))


# The fast INT8 layers hand on (N, C, H, W) views of channels-last arrays; reshaping one
# (F.flatten before a Linear) must copy, and the copy has no link to its source.  The last
# few such views are kept here, and an unregistered integer array equal to one of them,
# reshaped, takes its parameters (checked only when the table has no entry).  Views up to
# _KEEP_BYTES are held (the one flattened is often a temporary, gone by the time the next
# layer asks); larger ones by weak reference.
_STRIDED = collections.deque(maxlen=4)      # (view or weakref to it, scale, zero_point)
_KEEP_BYTES = 1 << 20


def _remember_strided(data, scale, zero_point):
    ref = (lambda: data) if data.nbytes <= _KEEP_BYTES else weakref.ref(data)
    _STRIDED.append((ref, float(scale), int(zero_point)))


def _from_strided_copy(data):
    for ref, scale, zp in _STRIDED:
        view = ref()
        if (view is not None and view.size == data.size and view.dtype == data.dtype
                and np.array_equal(view.reshape(data.shape), data)):
            _register(data, scale, zp)
            return scale, zp
    return None


def qparams_of(x):
    """``(scale, zero_point)`` of a quantized tensor (or of a view of one, or of a
    reshaped copy of a channels-last view), else None."""
    data = x.data if isinstance(x, Variable) else x
    if not isinstance(data, cuda.array_types()) or data.dtype.kind not in "iu":
        return None
    root = _root(data)
    entry = _TABLE.get(id(root))
    if entry is None or entry[0]() is not root:
        return _from_strided_copy(data) if _STRIDED else None
    return entry[1], entry[2]


def is_quantized(x):
    return qparams_of(x) is not None


def _refuse_arithmetic(name):
    def refuse(self, *args):
        raise QuantizationTypeError(
            f"QTensor {name}: arithmetic on quantized tensors is not defined; in the model, "
            "use a quantization.FloatFunctional (its add, mul, cat ...), which convert() "
            "turns into a QFunctional")
    return refuse


class QTensor(Variable):
    """A Variable of quantized integers (see the module docstring)."""

    __slots__ = ()

    def q_scale(self):
        return qparams_of(self)[0]

    def q_zero_point(self):
        return qparams_of(self)[1]

    scale = property(q_scale, doc="The scale: a value ``q`` stands for scale * (q - z).")
    zero_point = property(q_zero_point, doc="The zero point ``z``.")

    def int_repr(self):
        """The integer array itself."""
        return self.data

    def dequantize(self):
        """The real values, ``scale * (q - z)`` (a float32 Variable)."""
        from lezero.quantization.ops import DequantizePerTensor
        scale, zp = qparams_of(self)
        return DequantizePerTensor(scale, zp)(self)

    def __repr__(self):
        params = qparams_of(self)
        if params is None:
            return super().__repr__()
        body = str(self.data).replace("\n", "\n" + " " * 8)
        return (f"qtensor({body}, dtype={self.data.dtype}, scale={params[0]:.6g}, "
                f"zero_point={params[1]})")

    for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                  "__truediv__", "__rtruediv__", "__matmul__", "__rmatmul__", "__neg__",
                  "__pow__"):
        locals()[_name] = _refuse_arithmetic(_name)
    del _name


def make_qtensor(var, scale, zero_point):
    """Mark ``var`` (an integer Variable just computed) as quantized with these
    parameters; returns it as a ``QTensor`` (the same object: graphs and traces keep it)."""
    _register(var.data, scale, zero_point)
    if isinstance(var.data, np.ndarray) and not var.data.flags.c_contiguous:
        _remember_strided(var.data, scale, zero_point)
    if type(var) is Variable:
        var.__class__ = QTensor
    return var


def describe_module(module):
    """``QuantLinear 'classifier.0'``: the class and, once converted, the qualified name."""
    name = getattr(module, "_qname", None)
    return f"{type(module).__name__} {name!r}" if name else type(module).__name__


def expect_quantized(module, x):
    """``x``'s (scale, zero_point); raise ``QuantizationTypeError`` unless ``x`` is a
    quantized tensor."""
    params = qparams_of(x)
    if params is not None:
        return params
    where = describe_module(module)
    data = x.data if isinstance(x, Variable) else x
    dtype = getattr(data, "dtype", None)
    if dtype is not None and np.dtype(dtype).kind == "f":
        raise QuantizationTypeError(
            f"{where} received a float tensor ({dtype}, shape {tuple(data.shape)}) but runs "
            "on quantized integers: add a quantization.QuantStub() before it (where float "
            "data enters the quantized part of the model), or leave this layer in float "
            "(qconfig = None)")
    if dtype is not None and np.dtype(dtype).kind in "iu":
        raise QuantizationTypeError(
            f"{where} received {dtype} integers without quantization parameters: an "
            "operator that computes new values was applied to a quantized tensor (only "
            "views -- reshape, flatten, transpose, slicing -- keep scale and zero point); "
            "use the quantized modules or a FloatFunctional, or dequantize first with a "
            "quantization.DeQuantStub()")
    raise QuantizationTypeError(f"{where} expects a quantized tensor, got "
                                f"{type(x).__name__}")


def refuse_quantized(module, args):
    """A forward pre-hook for float layers of a converted model: raise when a quantized
    tensor arrives, naming the layer and the stub to add."""
    for a in args:
        if isinstance(a, Variable) and is_quantized(a):
            name = getattr(module, "_qname", None)
            where = f"{type(module).__name__} {name!r}" if name else type(module).__name__
            raise QuantizationTypeError(
                f"{where} is a float layer but received a quantized tensor ({a.dtype}, "
                f"shape {tuple(a.shape)}): add a quantization.DeQuantStub() before it, or "
                "quantize this layer too (give it a qconfig)")
    return None
