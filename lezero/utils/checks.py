"""Argument checks shared by every part of LeZero: one place, one rule for error kinds.

The rule (the same as Python's and PyTorch's): an argument of the wrong *kind* raises
``TypeError``; an argument of the right kind but a wrong *value* raises ``ValueError``.
``nn.Linear("3", 4)`` is a TypeError (a string is not an int); ``nn.Linear(0, 4)`` is a
ValueError (zero features).  Every message starts with ``where`` -- the operator, layer or
class the user called -- then names the argument and what it got:

    check_int("Conv2d", "kernel_size", "3")   # TypeError: Conv2d: kernel_size must be an int, got str '3'
    check_int("Linear", "in_features", 0, low=1)
                                              # ValueError: Linear: in_features must be a positive int, got 0

Functions, nn, optim, data and the subsystems above them all call these, so a new layer
gets the same wording for free.  The helpers return the checked value normalised (an int
as ``int``, a number as ``float``, a size as a tuple).
"""
import math
import numbers

import numpy as np

from lezero import cuda
from lezero.core import Variable, get_config

__all__ = ["is_int", "kind_of", "describe", "check_type", "check_int", "check_positive_ints",
           "check_number", "check_real", "check_bool", "check_bools", "check_choice",
           "check_callable", "ntuple", "check_int_or_tuple", "check_array", "check_float_array",
           "check_shape", "check_axis", "check_axes", "check_training"]


def is_int(value):
    """True for Python and NumPy integers, False for bools (``True`` is not a size)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def describe(value):
    """A short description of what a user passed: its type, and the value when short.

    A plain int shows as itself (``1``); anything else as its type, then its repr
    (``float 1.0``, ``str '3'``, ``bool True``, ``NoneType None``): in a message a float
    can pass for an int, a string for a number.  A long repr is left out."""
    text = repr(value)
    kind = type(value).__name__
    if len(text) > 40:
        return kind
    return text if kind == "int" else f"{kind} {text}"


def check_type(where, name, value, types, expected=None):
    """Raise TypeError unless ``isinstance(value, types)``; returns ``value``.

    ``expected`` words the allowed kinds for the message (default: the type names)."""
    if not isinstance(value, types):
        if expected is None:
            names = types if isinstance(types, tuple) else (types,)
            expected = " or ".join(t.__name__ for t in names)
        raise TypeError(f"{where}: {name} must be {expected}, got {describe(value)}")
    return value


def check_int(where, name, value, low=None, high=None, allow_none=False):
    """An int (not a bool, not a string) inside [low, high]; returned as ``int``.

    ``allow_none`` lets ``None`` through unchanged (an optional size)."""
    if value is None and allow_none:
        return None
    if not is_int(value):
        extra = " or None" if allow_none else ""
        raise TypeError(f"{where}: {name} must be an int{extra}, got {describe(value)}")
    value = int(value)
    if low is not None and value < low:
        bound = "a positive int" if low == 1 else f">= {low}"
        raise ValueError(f"{where}: {name} must be {bound}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{where}: {name} must be <= {high}, got {value}")
    return value


def check_number(where, name, value, low=None, high=None, low_open=False, high_open=False,
                 allow_none=False, expected="a number"):
    """A real number (not a bool) inside the interval; returned as ``float``.

    ``low_open``/``high_open`` exclude the bound itself (``(0, 1]`` is ``low=0,
    low_open=True, high=1``).  NaN is never inside an interval (without bounds any real
    number passes, NaN and infinities too).  ``expected`` words the kind in the
    TypeError's message."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        extra = " or None" if allow_none else ""
        raise TypeError(f"{where}: {name} must be {expected}{extra}, got {describe(value)}")
    value = float(value)
    if low is None and high is None:
        return value
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if math.isnan(value) or too_low or too_high:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        interval = f"{'(' if low_open or low is None else '['}{lo}, {hi}" \
                   f"{')' if high_open or high is None else ']'}"
        raise ValueError(f"{where}: {name} must be in {interval}, got {value}")
    return value


def check_real(where, name, value, **interval):
    """``check_number`` worded "a real number": the operators' hyperparameters (alpha,
    eps, p ...), which must stay Python floats so they never promote float32 data."""
    return check_number(where, name, value, expected="a real number", **interval)


def check_bool(where, name, value):
    """A bool (Python's or NumPy's); returned as ``bool``.  ``0``/``1`` and strings are
    refused: ``bias="False"`` is a bug, not a choice."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be a bool, got {describe(value)}")
    return bool(value)


def check_positive_ints(where, **values):
    """``check_int(where, name, value, low=1)`` for each keyword (a layer's sizes)."""
    for name, value in values.items():
        check_int(where, name, value, low=1)


def check_bools(where, **values):
    """``check_bool`` for each keyword (a layer's flags)."""
    for name, value in values.items():
        check_bool(where, name, value)


def check_choice(where, name, value, choices):
    """One of ``choices`` (strings, usually); a value of another kind is a TypeError."""
    kinds = tuple({type(c) for c in choices})
    allowed = ", ".join(map(repr, choices))
    if not isinstance(value, kinds):
        raise TypeError(f"{where}: {name} must be one of {allowed}, got {describe(value)}")
    if value not in choices:
        raise ValueError(f"{where}: {name} must be one of {allowed}, got {value!r}")
    return value


def check_callable(where, name, value, allow_none=False):
    """A callable (or None when ``allow_none``)."""
    if value is None and allow_none:
        return None
    if not callable(value):      # the type says what was passed instead of a function
        raise TypeError(f"{where}: {name} must be callable, got {type(value).__name__}")
    return value


def ntuple(where, name, value, n, low=None):
    """An int or a sequence of ``n`` ints, each >= ``low``, as a tuple of ``n`` ints.

    ``ntuple("Conv2d", "stride", 2, 2) == (2, 2)``; a string, a float or a tuple of the
    wrong length is a TypeError, an entry below ``low`` a ValueError."""
    if is_int(value):
        out = (int(value),) * n
    elif isinstance(value, (tuple, list)) and len(value) == n and all(map(is_int, value)):
        out = tuple(int(v) for v in value)
    else:
        raise TypeError(f"{where}: {name} must be an int or a tuple of {n} ints, "
                        f"got {describe(value)}")
    if low is not None and any(v < low for v in out):
        raise ValueError(f"{where}: {name} must be >= {low} in every dim, got {value!r}")
    return out


def check_int_or_tuple(where, name, value, low=None):
    """An int or a tuple of ints of any length (e.g. a shape or a kernel size whose
    dimension the caller checks later); returned unchanged but normalised to ints."""
    if is_int(value):
        out = int(value)
        vals = (out,)
    elif isinstance(value, (tuple, list)) and all(map(is_int, value)):
        out = tuple(int(v) for v in value)
        vals = out
    else:
        raise TypeError(f"{where}: {name} must be an int or a tuple of ints, "
                        f"got {describe(value)}")
    if low is not None and any(v < low for v in vals):
        raise ValueError(f"{where}: {name} must be >= {low}, got {value!r}")
    return out


def check_array(where, name, x):
    """The array behind a Variable or an ndarray (NumPy or CuPy); TypeError otherwise."""
    if isinstance(x, Variable):
        return x.data
    if isinstance(x, cuda.array_types()):
        return x
    raise TypeError(f"{where}: {name} must be a Variable or an ndarray, got "
                    f"{type(x).__name__}")


def kind_of(dtype):
    """``dtype.kind``, with ml_dtypes' bfloat16 (kind 'V' to NumPy) counted as floating."""
    kind = dtype.kind
    # ``dtype.name`` is a slow Python property: read it only for void-kind dtypes.
    return "f" if kind == "V" and dtype.name == "bfloat16" else kind


def check_float_array(where, name, x, shape=None):
    """``check_array``, and the dtype must be floating point; with ``shape``, the array
    must have exactly that shape (a weight, a bias)."""
    arr = check_array(where, name, x)
    if kind_of(arr.dtype) != "f":
        raise TypeError(f"{where}: {name} must be floating point, got dtype {arr.dtype}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{where}: {name} must have shape {tuple(shape)}, got {tuple(arr.shape)}")
    return arr


def check_shape(where, name, x, shape):
    """Raise ValueError unless the array behind ``x`` has exactly ``shape``."""
    got = check_array(where, name, x).shape
    if tuple(got) != tuple(shape):
        raise ValueError(f"{where}: {name} must have shape {tuple(shape)}, got {tuple(got)}")
    return x


def check_axis(where, axis, ndim, name="axis", zero_dim=True):
    """One axis of an ``ndim``-dim array, counted from the end when negative; returned in
    [0, ndim).  A 0-dim array accepts axis 0 and -1 (as NumPy's reductions do) unless
    ``zero_dim`` is False (a shape operator has no axis to act on there)."""
    if not is_int(axis):
        raise TypeError(f"{where}: {name} must be an int, got {describe(axis)}")
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{where}: {name} {axis} is out of range for an input with {ndim} dims")
    if ndim == 0 and not zero_dim:
        raise ValueError(f"{where}: {name} {axis} is out of range for a 0-d input")
    return int(axis) % max(ndim, 1)


def check_axes(where, axis, ndim):
    """None (all axes), an int or a sequence of ints, as None or a sorted tuple of distinct
    axes in [0, ndim)."""
    if axis is None:
        return None
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = tuple(sorted(check_axis(where, a, ndim) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: repeated axis in {axis}")
    return out


def check_training(where, training):
    """The ``training`` flag of a random operator: None follows ``lz.Config.train``;
    anything but a bool or None is a TypeError."""
    if training is None:
        return get_config().train
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"{where}: training must be a bool or None, got {type(training).__name__}")
    return bool(training)
