"""Fixed-point requantization: a real multiplier as an int32 and a shift, as gemmlowp and
TFLite compute it.

An int32 accumulator ``acc`` carries the scale ``s_in * s_w``; the layer's output has the
scale ``s_out``.  The requantized value is ``round(acc * M)`` with the real multiplier
``M = s_in * s_w / s_out``, computed without any floating point at run time:

    M = m * 2**(shift - 31),   m an int32 in [2**30, 2**31)      (quantize_multiplier)
    round(acc * M) = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(
                         acc * 2**max(shift, 0), m), max(-shift, 0))         (mbqm)

``SaturatingRoundingDoublingHighMul(a, b)`` is the high 32 bits of ``2 a b`` rounded to
nearest (ties away from zero); ``RoundingDivideByPOT(x, e)`` divides by ``2**e`` rounding
to nearest (ties away from zero).  These are gemmlowp's functions; TFLite's
``MultiplyByQuantizedMultiplier`` is the same composition.  The NumPy versions here work
on int64 arrays (any backend); the Numba kernels in ``kernels.py`` repeat them per element
and the tests check that both give the same integers.
"""
import numpy as np

from lezero import cuda

__all__ = ["quantize_multiplier", "mbqm", "INT32_MIN", "INT32_MAX"]

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
_HALF = 1 << 30


def quantize_multiplier(real):
    """``(m, shift)`` int32 arrays with ``real ~= m * 2**(shift - 31)`` for each entry of
    ``real`` (a non-negative float or array); ``m`` is in [2**30, 2**31), or 0 for 0 and
    for multipliers below 2**-32 (which round every int32 to 0 anyway)."""
    real = np.asarray(real, dtype=np.float64)
    if not np.all(np.isfinite(real)) or np.any(real < 0):
        raise ValueError(f"quantize_multiplier: multipliers must be finite and "
                         f"non-negative, got {real}")
    if np.any(real >= 2.0 ** 30):
        raise ValueError(f"quantize_multiplier: multiplier {real.max()} is too large "
                         "(>= 2**30)")
    q, e = np.frexp(real)                           # real = q * 2**e, q in [0.5, 1)
    fixed = np.floor(q * 2.0 ** 31 + 0.5).astype(np.int64)   # ties away from zero
    up = fixed == 1 << 31                           # q rounded up to 1.0
    fixed = np.where(up, fixed // 2, fixed)
    e = np.where(up, e + 1, e).astype(np.int64)
    tiny = (e < -31) | (real == 0)
    fixed, e = np.where(tiny, 0, fixed), np.where(tiny, 0, e)
    return fixed.astype(np.int32), e.astype(np.int32)


def _trunc_div_pow2_31(s, xp):
    """``s / 2**31`` rounded toward zero (C's integer division), for int64 arrays."""
    return xp.where(s >= 0, s >> 31, -((-s) >> 31))


def srdhm(a, b):
    """gemmlowp's SaturatingRoundingDoublingHighMul on int64 arrays holding int32 values
    (``b`` is a multiplier, never INT32_MIN, so the saturating case cannot arise)."""
    xp = cuda.get_array_module(a)
    ab = a * b
    nudge = xp.where(ab >= 0, _HALF, 1 - _HALF)
    return _trunc_div_pow2_31(ab + nudge, xp)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp's RoundingDivideByPOT: ``x / 2**exponent`` rounded to nearest, ties away
    from zero (int64 arrays, ``exponent`` >= 0)."""
    xp = cuda.get_array_module(x)
    mask = (xp.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(np.int64)
    return (x >> exponent) + (remainder > threshold).astype(np.int64)


def mbqm(x, m, shift):
    """MultiplyByQuantizedMultiplier: ``round(x * m * 2**(shift - 31))`` in integers.

    ``x``: int32 values (any integer array); ``m``, ``shift``: from
    ``quantize_multiplier`` (broadcast against ``x``).  Returns int64."""
    xp = cuda.get_array_module(x)
    x = x.astype(np.int64)
    m = xp.asarray(m, dtype=np.int64)
    shift = xp.asarray(shift, dtype=np.int64)
    left = xp.maximum(shift, 0)
    right = xp.maximum(-shift, 0)
    return rounding_divide_by_pot(srdhm(x << left, m), right)
