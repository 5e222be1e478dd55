"""Elementwise arithmetic and math operators (NumPy names, NumPy broadcasting).

The family lives in three modules, re-exported here:

* ``arith``  add sub mul div neg pow square sqrt rsqrt reciprocal (+ rsub rdiv rpow)
* ``unary``  exp expm1 log log1p log2 log10 abs sign sin cos tan arcsin arccos arctan
                  sinh cosh tanh arcsinh arccosh arctanh erf erfc floor ceil round
* ``binary`` arctan2 hypot maximum minimum clip where

Every backward is written with LeZero operators, so gradients can be differentiated again.
Binary operators reduce their gradients back to each input's shape with ``sum_to``.
Python numbers take the dtype of the array next to them: float32 stays float32.
"""
from lezero.functions.math import arith as _arith, binary as _binary, unary as _unary
from lezero.functions.math.arith import *     # noqa: F401,F403
from lezero.functions.math.arith import Add, Div, Mul, Neg, Pow, Sub  # noqa: F401
from lezero.functions.math.binary import *    # noqa: F401,F403
from lezero.functions.math.unary import *     # noqa: F401,F403

Exp, Log, Sin, Cos, Tanh = (_unary.FUNCTIONS[n] for n in ("exp", "log", "sin", "cos", "tanh"))

__all__ = _arith.__all__ + _unary.__all__ + _binary.__all__
