"""A float32 ``e^x`` that Numba can inline into vectorised loops.

Numba compiles ``math.exp`` to a call into the C library, and a loop with a call in it
stays scalar: GELU and softmax kernels ran about 3x slower that way than with NumPy's
SIMD exp in a separate pass.  ``exp32`` below is branch-free arithmetic, so LLVM turns
a loop around it into SIMD code and the exponential costs no extra pass over memory.

Method (the classic Cody-Waite reduction):

    x = n ln2 + r,  n = round(x / ln2),  |r| <= ln2 / 2
    e^x = 2^n * e^r,  e^r by its Taylor polynomial to r^7 (error < 3e-9 relative,
    far below float32's rounding), 2^n built directly in the float's exponent bits.

ln2 is split into a high part with few significant bits and a small correction, so
``x - n ln2`` stays exact to float32 precision for every n in range.  Inputs are
clamped to [-104, 88.7] (e^x of float32's range, subnormals included); below the clamp
the result is 0, above it +inf, like ``numpy.exp``.  NaN propagates.  Accuracy against NumPy's
float32 exp: within 2 ulp (tested in tests/kernels/test_fastexp.py).
"""
import numpy as np

from lezero.kernels import intrinsic, jit

__all__ = ["exp32", "exp32_nonpositive", "bits_to_float32", "float32_to_bits", "max32", "FAST"]

_f = np.float32
_LOG2E = _f(1.4426950408889634)
_LN2_HI = _f(0.693359375)           # 8 significant bits: n * _LN2_HI is exact
_LN2_LO = _f(-2.12194440e-4)        # ln2 - _LN2_HI
_LO, _HI = _f(-103.97208), _f(88.72283)
_NONPOSITIVE_LO = _f(-87.0)      # e^-87 = 1.6e-38: 2^n still fits one float's exponent
_C2, _C3, _C4, _C5, _C6, _C7 = (_f(1 / 2), _f(1 / 6), _f(1 / 24), _f(1 / 120), _f(1 / 720),
                                _f(1 / 5040))
_ONE, _HALF, _ZERO, _INF = _f(1.0), _f(0.5), _f(0.0), _f(np.inf)


@intrinsic
def bits_to_float32(typingctx, bits):
    """Reinterpret the low 32 bits of an integer as a float32 (an LLVM bitcast, free in
    SIMD code).  Numba widens int32 arithmetic to int64, hence the truncation."""
    from llvmlite import ir
    from numba import types
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = args[0]
        if bits.bitwidth > 32:
            low = builder.trunc(low, ir.IntType(32))
        return builder.bitcast(low, ir.FloatType())
    return types.float32(bits), codegen


@intrinsic
def float32_to_bits(typingctx, x):
    """The bits of a float32 as an int32 (an LLVM bitcast, the inverse of
    ``bits_to_float32``)."""
    from llvmlite import ir
    from numba import types
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(x), codegen


# fastmath without "nnan"/"ninf" (LLVM would drop the NaN and inf handling) and without
# "reassoc" (it may multiply the two power-of-two factors first, overflowing to inf).
FAST = {"nsz", "arcp", "contract", "afn"}


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _reduced(c):
    """(n, p): c = n ln2 + r with |r| <= ln2/2, and p = e^r by its degree-7 polynomial."""
    n = np.floor(c * _LOG2E + _HALF)
    r = (c - n * _LN2_HI) - n * _LN2_LO
    return n, _ONE + r * (_ONE + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * (
        _C6 + r * _C7))))))


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def exp32_nonpositive(a):
    """e^a for a float32 scalar a <= 0: one clamp (no overflow side) and 2^n as one
    exponent field; 0 below e^-87 (float32's smallest normal is e^-87.3), where exp32
    goes on into the subnormals.  About 20% faster than exp32 in the GELU loops."""
    c = max(a, _NONPOSITIVE_LO)
    n, p = _reduced(c)
    g = p * bits_to_float32((np.int32(n) + np.int32(127)) << np.int32(23))
    return g if a >= _NONPOSITIVE_LO else _ZERO          # a select, not a branch


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def exp32(x):
    """e^x for a float32 scalar, branch-free so loops around it vectorise."""
    c = min(max(x, _LO), _HI)
    n, p = _reduced(c)
    # 2^n for n in [-150, 128] as 2^a * 2^b with a = floor(n/2), b = n - a: both factors
    # are normal floats (exponent field b + 127 in [52, 191]) and their product rounds
    # into float32's subnormals or up to the top of its range as e^x does.
    k = np.int32(n)
    a = k >> np.int32(1)
    y = p * bits_to_float32((a + np.int32(127)) << np.int32(23)) \
        * bits_to_float32((k - a + np.int32(127)) << np.int32(23))
    # Selects, not branches: underflow to 0, overflow to inf; NaN passes through p.
    y = _ZERO if x < _LO else y
    return _INF if x > _HI else y


_MAGNITUDE = np.int32(0x7FFFFFFF)


@jit(cache=True, inline="always")
def _ordered(bits):
    """Flip a negative float's magnitude bits, so that int32 order is float order
    (-inf < -1 < -0 < 0 < 1 < inf < NaN); the map is its own inverse."""
    return bits ^ ((bits >> np.int32(31)) & _MAGNITUDE)


@jit(cache=True, error_model="numpy", inline="always")
def max32(a, n, scale):
    """max(scale * a[:n]) of a 1-D float32 array, -inf when n == 0.

    A float max reduction does not vectorise in Numba (its NaN handling is a branch),
    and it cost softmax as much as the exponentials; the same reduction over int32 keys
    whose order is the floats' order does.  A NaN anywhere gives NaN.
    """
    best = _ordered(float32_to_bits(_f(-np.inf)))
    for j in range(n):
        x = a[j] * scale
        x = abs(x) if x != x else x      # a NaN with its sign bit set would sort lowest
        key = _ordered(float32_to_bits(x))
        best = key if key > best else best
    return bits_to_float32(_ordered(best))
