"""Elementwise arithmetic and math operators (NumPy names, NumPy broadcasting).

The family lives in four modules, re-exported here:

* ``arith``     add sub mul div neg pow square sqrt rsqrt reciprocal (+ rsub rdiv rpow)
* ``unary``     exp expm1 log log1p log2 log10 sin cos tan arcsin arccos arctan sinh cosh
                tanh arcsinh arccosh arctanh erf erfc
* ``rounding``  abs sign floor ceil round
* ``binary``    arctan2 hypot maximum minimum clip where

``elementwise`` holds ``Elementwise``, the one mechanism behind elementwise functions of
one input (the activations use it too).  Every backward is written with LeZero operators,
so gradients can be differentiated again.  Binary operators reduce their gradients back to
each input's shape with ``sum_to``.  Python numbers take the dtype of the array next to
them: float32 stays float32.
"""
from lezero.functions.math import (arith as _arith, binary as _binary, rounding as _rounding,
                                   unary as _unary)
from lezero.functions.math.arith import *      # noqa: F401,F403
from lezero.functions.math.arith import Add, Div, Mul, Neg, Pow, Sub  # noqa: F401
from lezero.functions.math.binary import *     # noqa: F401,F403
from lezero.functions.math.elementwise import FUNCTIONS, Elementwise, float_operator  # noqa: F401
from lezero.functions.math.rounding import *   # noqa: F401,F403
from lezero.functions.math.unary import *      # noqa: F401,F403
from lezero.functions.math.unary import Cos, Exp, Log, Sin, Tanh  # noqa: F401

__all__ = _arith.__all__ + _unary.__all__ + _rounding.__all__ + _binary.__all__
