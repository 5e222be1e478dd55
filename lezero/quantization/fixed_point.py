"""Fixed-point requantization: a real multiplier as an int32 and a shift, as TFLite
computes it.

An int32 accumulator ``acc`` carries the scale ``s_in * s_w``; the layer's output has the
scale ``s_out``.  The requantized value is ``round(acc * M)`` with the real multiplier
``M = s_in * s_w / s_out``, computed without any floating point at run time:

    M = m * 2**(shift - 31),   m an int32 in [2**30, 2**31)      (quantize_multiplier)
    round(acc * M) = (acc * m + 2**(30 - shift)) >> (31 - shift)            (mbqm)

in 64-bit integers: TFLite's ``MultiplyByQuantizedMultiplier`` in its single-rounding
form (``TFLITE_SINGLE_ROUNDING``), which rounds to nearest with ties upward.  gemmlowp's
older form (``SaturatingRoundingDoublingHighMul`` then ``RoundingDivideByPOT``) rounds
twice, so a value near a half can land up to 0.5 * 2**shift steps off (shift < 0):
measured on a first convolution, 0.3% of the outputs one step away from round(acc * M),
where the single rounding and onnxruntime's float requantization agree.  The NumPy version works on int64 arrays (any
backend); the Numba kernels repeat it per element.
"""
import numpy as np

from lezero import cuda

__all__ = ["quantize_multiplier", "mbqm", "INT32_MIN", "INT32_MAX"]

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


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


def mbqm(x, m, shift):
    """MultiplyByQuantizedMultiplier: ``round(x * m * 2**(shift - 31))``, ties upward, in
    integers.  ``x``: int32 values (any integer array); ``m``, ``shift``: from
    ``quantize_multiplier`` (broadcast against ``x``).  Returns int64."""
    xp = cuda.get_array_module(x)
    total = 31 - xp.asarray(shift, dtype=np.int64)
    prod = x.astype(np.int64) * xp.asarray(m, dtype=np.int64)
    return (prod + (xp.int64(1) << (total - 1))) >> total
