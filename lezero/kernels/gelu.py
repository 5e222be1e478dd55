"""GELU, exact and tanh-approximated: the forward ``gelu`` and the fused gradient
``gelu_grad`` = ``gy * gelu'(x)``.

``gelu_ref`` / ``gelu_grad_ref`` are the NumPy (and CuPy) reference, with scipy's erf;
``gelu_numba`` / ``gelu_grad_numba`` run the float32 Numba kernels; ``gelu`` and
``gelu_grad`` dispatch (the kernel for float32 NumPy arrays where ``enabled``).

Why a kernel: NumPy needs about eight passes over memory and scipy's scalar erf for
GELU's forward and backward.  The kernel is one vectorised loop (reading x, and gy for
the gradient, writing the result), and gets the normal CDF and the normal density from
a *single* exp (``fastexp.exp32``'s method for a non-positive argument, inlined): with
z = |x| / sqrt(2),

    P(N > |x|) = erfc(z) / 2 ~ t * poly(t) * e^(-z^2) / 2,   t = 1 / (1 + p z)

(Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7, smaller than float32's
rounding at 1), and e^(-z^2) = e^(-x^2/2) is also the density's exponential.  Working
from the tail keeps tiny GELU values for very negative x meaningful (relative error 0.05%
at x = -4, 1.5% at x = -9) where 1 + erf(x) cancels to 0.  The approximation is too
coarse for float64, which always takes the reference path.

The tanh form x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), is computed as
x * sigmoid(2u) (the same number: 1 + tanh u = 2 sigmoid(2u)), one exp32 per element
and no cancellation in 1 + tanh u for negative x.
"""
import math

import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.kernels.fastexp import FAST, exp32, exp32_nonpositive
from lezero.runtime import run_elementwise

__all__ = ["gelu", "gelu_grad", "gelu_ref", "gelu_grad_ref", "gelu_numba", "gelu_grad_numba"]

SQRT_HALF = 1 / math.sqrt(2)
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
TANH_C = math.sqrt(2 / math.pi)
TANH_K = 0.044715


# ----- NumPy reference ---------------------------------------------------------------------

def _erf(x):
    """erf of ``x``'s backend (scipy's, cupyx's, ...): same dtype out as in."""
    from lezero.backends import get_backend
    return get_backend(x).special.erf


def _xp(x):
    from lezero.cuda import get_array_module
    return get_array_module(x)


def gelu_ref(x, approximate="none"):
    """GELU of a raw array (NumPy or CuPy, any float dtype)."""
    xp = _xp(x)
    if approximate == "tanh":
        return 0.5 * x * (1 + xp.tanh(TANH_C * (x + TANH_K * x * x * x)))
    return 0.5 * x * (1 + _erf(x)(x * SQRT_HALF))


def gelu_grad_ref(x, gy, approximate="none"):
    """gy * gelu'(x) on raw arrays."""
    xp = _xp(x)
    if approximate == "tanh":
        t = xp.tanh(TANH_C * (x + TANH_K * x * x * x))     # x * x * x: ** 3 is a slow pow
        du = TANH_C * (1 + 3 * TANH_K * x * x)
        return gy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du)
    cdf = 0.5 * (1 + _erf(x)(x * SQRT_HALF))
    pdf = xp.exp(-0.5 * x * x) * INV_SQRT_2PI
    return gy * (cdf + x * pdf)


# ----- Numba kernels (float32) ----------------------------------------------------------------

_f = np.float32
_SQRT_HALF = _f(1 / math.sqrt(2))
_INV_SQRT_2PI = _f(1 / math.sqrt(2 * math.pi))
_P = _f(0.3275911)
_A1, _A2, _A3, _A4, _A5 = (_f(0.254829592), _f(-0.284496736), _f(1.421413741),
                           _f(-1.453152027), _f(1.061405429))
_ONE, _HALF = _f(1.0), _f(0.5)


# The loops below have no libm call and no branch, so LLVM vectorises them: the one
# transcendental, e^(-x^2/2), is exp32's branch-free arithmetic (math.exp, a libm call,
# kept the loop scalar and GELU about 3x slower).  error_model="numpy": no
# ZeroDivisionError check, whose branch would stop vectorising.  FAST keeps NaN and inf
# semantics (GELU(NaN) is NaN).
@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _cdf(v, g):
    """Phi(v), the standard normal CDF, given g = e^(-v^2/2)."""
    z = abs(v) * _SQRT_HALF
    t = _ONE / (_ONE + _P * z)
    tail = _HALF * g * t * (_A1 + t * (_A2 + t * (_A3 + t * (_A4 + t * _A5))))
    positive = _f(v >= 0)                    # a select, not a branch
    return tail + positive * (_ONE - _f(2) * tail)


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _gauss(v):
    """e^(-v^2/2) (``fastexp.exp32_nonpositive``: the argument is never positive; 0 where
    |x| > 13, far below float32's resolution of the tail it scales)."""
    return exp32_nonpositive(_f(-0.5) * v * v)


@jit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _forward(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = v * _cdf(v, _gauss(v))


@jit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _backward(x, gy, out):
    for i in range(x.size):
        v = x[i]
        g = _gauss(v)
        # gelu'(x) = Phi(x) + x phi(x), phi(x) = g / sqrt(2 pi)
        out[i] = gy[i] * (_cdf(v, g) + v * g * _INV_SQRT_2PI)


_TWO_C = _f(2 * math.sqrt(2 / math.pi))
_K, _3K = _f(0.044715), _f(3 * 0.044715)


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _sigmoid_2u(v):
    """sigmoid(2u) = (1 + tanh u) / 2 for the tanh form's u(v)."""
    return _ONE / (_ONE + exp32(-_TWO_C * (v + _K * v * v * v)))


@jit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _forward_tanh(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = v * _sigmoid_2u(v)


@jit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _backward_tanh(x, gy, out):
    for i in range(x.size):
        v = x[i]
        s = _sigmoid_2u(v)
        # d/dv [v s(2u)] = s + v s (1 - s) * 2u'(v), 2u' = 2c (1 + 3k v^2)
        out[i] = gy[i] * (s + v * s * (_ONE - s) * _TWO_C * (_ONE + _3K * v * v))


def _flat(a):
    return np.ascontiguousarray(a).reshape(-1)


APPROXIMATIONS = ("none", "tanh")


def _check_approximate(op, approximate):
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"{op}: approximate must be 'none' or 'tanh', got {approximate!r}")


def gelu_numba(x, approximate="none"):
    """GELU of a float32 NumPy array (any shape): x * Phi(x), or the tanh form."""
    argcheck.arrays("gelu_numba", x=x)
    argcheck.dtype_is("gelu_numba", "x", x, np.float32)
    _check_approximate("gelu_numba", approximate)
    return _gelu(x, approximate)


def _gelu(x, approximate):
    out = np.empty(x.shape, np.float32)
    run_elementwise(_forward_tanh if approximate == "tanh" else _forward, _flat(x),
                    out.reshape(-1))
    return out


def gelu_grad_numba(x, gy, approximate="none"):
    """gy * gelu'(x) for float32 NumPy arrays of one shape (the kernel reads ``gy[i]``
    for every element of ``x``)."""
    argcheck.arrays("gelu_grad_numba", x=x, gy=gy)
    argcheck.dtype_is("gelu_grad_numba", "x", x, np.float32)
    argcheck.dtype_is("gelu_grad_numba", "gy", gy, np.float32)
    argcheck.same_shape("gelu_grad_numba", "x", x, "gy", gy)
    _check_approximate("gelu_grad_numba", approximate)
    return _gelu_grad(x, gy, approximate)


def _gelu_grad(x, gy, approximate):
    out = np.empty(x.shape, np.float32)
    kernel = _backward_tanh if approximate == "tanh" else _backward
    run_elementwise(kernel, _flat(x), _flat(gy), out.reshape(-1))
    return out


# ----- dispatch ---------------------------------------------------------------------------------

def _use_kernel(*arrays):
    return all(a.dtype == np.float32 for a in arrays) and enabled(*arrays)


def gelu(x, approximate="none"):
    """GELU of a raw array: the kernel for float32 NumPy arrays, else the reference."""
    _check_approximate("gelu", approximate)
    return _gelu(x, approximate) if _use_kernel(x) else gelu_ref(x, approximate)


def gelu_grad(x, gy, approximate="none"):
    """gy * gelu'(x): the kernel for float32 NumPy arrays, else the reference; ``x`` and
    ``gy`` must have one shape on either path."""
    argcheck.same_shape("gelu_grad", "x", x, "gy", gy)
    _check_approximate("gelu_grad", approximate)
    if _use_kernel(x, gy):
        return _gelu_grad(x, gy, approximate)
    return gelu_grad_ref(x, gy, approximate)
