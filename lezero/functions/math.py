"""Elementwise arithmetic and math operators (NumPy names, NumPy broadcasting).

The family lives in three modules, re-exported here:

* ``math_arith``  add sub mul div neg pow square sqrt rsqrt reciprocal (+ rsub rdiv rpow)
* ``math_unary``  exp expm1 log log1p log2 log10 abs sign sin cos tan arcsin arccos arctan
                  sinh cosh tanh arcsinh arccosh arctanh erf erfc floor ceil round
* ``math_binary`` arctan2 hypot maximum minimum clip where

Every backward is written with LeZero operators, so gradients can be differentiated again.
Binary operators reduce their gradients back to each input's shape with ``sum_to``.
Python numbers take the dtype of the array next to them: float32 stays float32.
"""
from lezero.functions import math_arith, math_binary, math_unary
from lezero.functions.math_arith import *     # noqa: F401,F403
from lezero.functions.math_arith import Add, Div, Mul, Neg, Pow, Sub  # noqa: F401
from lezero.functions.math_binary import *    # noqa: F401,F403
from lezero.functions.math_unary import *     # noqa: F401,F403

Exp, Log, Sin, Cos, Tanh = (math_unary.FUNCTIONS[n] for n in ("exp", "log", "sin", "cos", "tanh"))

__all__ = math_arith.__all__ + math_unary.__all__ + math_binary.__all__
