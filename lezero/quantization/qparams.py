"""Quantization schemes and parameters: integer ranges, and scale / zero point from a
range of real values, computed as ``torch.ao.quantization`` computes them.

A *scheme* is one of

=========================  ===========================================================
``per_tensor_affine``      one scale and zero point; [min, max] (stretched to hold 0)
                           maps onto [qmin, qmax]
``per_tensor_symmetric``   one scale, zero point 0 (int8) or 128 (uint8): [-a, a] with
                           ``a = max(|min|, |max|)`` maps onto the range
``per_channel_affine``     as affine, one scale and zero point per slice along an axis
``per_channel_symmetric``  as symmetric, per slice (the usual choice for weights)
=========================  ===========================================================

Dtypes are ``"quint8"`` (uint8, 0..255) and ``"qint8"`` (int8, -128..127); NumPy's
``np.uint8`` / ``np.int8`` and the strings ``"uint8"`` / ``"int8"`` name the same.
"""
import numpy as np

from lezero import cuda

__all__ = ["QSCHEMES", "as_qdtype", "qrange", "is_per_channel", "is_symmetric",
           "calculate_qparams", "EPS"]

QSCHEMES = ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
            "per_channel_symmetric")
EPS = float(np.finfo(np.float32).eps)     # the smallest scale, as torch's observers use
_DTYPES = {"quint8": np.uint8, "uint8": np.uint8, "qint8": np.int8, "int8": np.int8}


def as_qdtype(dtype, where="quantization"):
    """The NumPy dtype (uint8 or int8) that ``dtype`` names."""
    if isinstance(dtype, str):
        if dtype in _DTYPES:
            return np.dtype(_DTYPES[dtype])
    else:
        try:
            d = np.dtype(dtype)
        except TypeError:
            d = None
        if d in (np.dtype(np.uint8), np.dtype(np.int8)):
            return d
    raise ValueError(f"{where}: dtype must be 'quint8' (uint8) or 'qint8' (int8), got "
                     f"{dtype!r}")


def qrange(dtype, reduce_range=False, quant_min=None, quant_max=None, where="quantization"):
    """``(qmin, qmax)``: the dtype's range, halved by ``reduce_range`` (one bit less, as
    PyTorch's fbgemm configuration asks), or the custom ``quant_min``/``quant_max``."""
    d = as_qdtype(dtype, where)
    info = np.iinfo(d)
    if quant_min is not None or quant_max is not None:
        if quant_min is None or quant_max is None:
            raise ValueError(f"{where}: give both quant_min and quant_max, got "
                             f"{quant_min!r} and {quant_max!r}")
        if not info.min <= quant_min < quant_max <= info.max:
            raise ValueError(f"{where}: need {info.min} <= quant_min < quant_max <= "
                             f"{info.max} for {d}, got [{quant_min}, {quant_max}]")
        return int(quant_min), int(quant_max)
    if reduce_range:
        return (0, 127) if d == np.uint8 else (-64, 63)
    return int(info.min), int(info.max)


def is_per_channel(qscheme):
    return qscheme.startswith("per_channel")


def is_symmetric(qscheme):
    return qscheme.endswith("symmetric")


def calculate_qparams(min_val, max_val, qmin, qmax, qscheme, dtype, custom_range=False,
                      eps=EPS):
    """``(scale float32, zero_point int32)`` arrays for observed ranges (PyTorch's
    ``_calculate_qparams``): the range is widened to include 0, so that the real value 0
    is exactly representable (padding, ReLU's zeros)."""
    xp = cuda.get_array_module(min_val)
    min_val = xp.asarray(min_val, dtype=np.float32)
    max_val = xp.asarray(max_val, dtype=np.float32)
    min_neg = xp.minimum(min_val, np.float32(0))
    max_pos = xp.maximum(max_val, np.float32(0))
    eps = np.float32(eps)
    if is_symmetric(qscheme):
        max_pos = xp.maximum(-min_neg, max_pos)
        scale = xp.maximum(max_pos / np.float32((qmax - qmin) / 2), eps)
        if as_qdtype(dtype) == np.uint8:
            zp = (qmin + qmax) // 2 if custom_range else 128
        else:
            zp = 0
        zero_point = xp.full(scale.shape, zp, dtype=np.int32)
    else:
        scale = xp.maximum((max_pos - min_neg) / np.float32(qmax - qmin), eps)
        zero_point = qmin - xp.rint(min_neg / scale).astype(np.int32)
        zero_point = xp.clip(zero_point, qmin, qmax).astype(np.int32)
    return scale.astype(np.float32), zero_point
