"""What ``Module`` does with what it is given, PyTorch's way, kept out of ``module.py``.

* ``cast_floating(module, dtype)``: ``module.to(dtype)`` / ``.half()`` / ``.double()``
  cast every floating parameter, gradient and buffer (integer buffers such as a step
  counter keep their dtype, as in PyTorch).
* ``prepare_inputs(module, args)``: run by ``Module.__call__`` on the positional inputs.
  A Python list or tuple of numbers becomes an array the way ``Variable`` converts data
  (floats to float32); a float64 array or Variable given to a module whose parameters are
  float32 (float16...) is cast to the parameters' dtype, with one warning per layer type
  and pair of dtypes (not when the first parameter is an embedding's: a model fed
  indices reports float indices itself).  PyTorch raises there; LeZero casts so that NumPy's float64 default
  (``np.random.rand``) keeps working, and says so once.
"""
import warnings

import numpy as np

from lezero import cuda
from lezero.core import Variable, as_array

_WARNED = set()


class DtypeWarning(UserWarning):
    """An input was cast to a module's parameter dtype."""


def is_floating(dtype):
    """True for NumPy floats and ml_dtypes' bfloat16 / float8 (kind 'V' to NumPy)."""
    return dtype.kind == "f" or dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def cast_floating(module, dtype, where):
    """Cast the floating parameters (and their gradients) and buffers of ``module``."""
    if not is_floating(dtype):
        raise TypeError(f"{where}: a module can only be cast to a floating dtype, got {dtype}")

    def convert(a):
        return a.astype(dtype) if is_floating(a.dtype) and a.dtype != dtype else a

    return module._move(convert)      # parameters, their gradients, buffers: in place


def _is_numbers(value):
    """A (nested) list or tuple holding only Python numbers."""
    if isinstance(value, (list, tuple)):
        return len(value) > 0 and all(_is_numbers(v) for v in value)
    return isinstance(value, (bool, int, float, np.number))


def _parameter_dtype(module):
    """The dtype of the first parameter, or None when it belongs to a layer that takes
    indices (an embedding: a float input there is an error it reports, not data to cast)."""
    for m in module.modules():
        for p in m._parameters.values():
            if p is not None:
                return None if getattr(m, "takes_indices", False) else p.data.dtype
    return None


def _cast_input(module, x, index):
    dtype = _parameter_dtype(module)
    if dtype is None or dtype == np.float64 or dtype.kind != "f":
        return x
    key = (type(module).__qualname__, dtype.name)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"{type(module).__name__}: input {index} is float64 but the layer's "
                      f"parameters are {dtype}; casting the input to {dtype} (pass {dtype} "
                      f"data, or call .double() on the model to compute in float64)",
                      DtypeWarning, stacklevel=4)
    if isinstance(x, Variable):
        return x.to(dtype=dtype)            # differentiable: the gradient comes back float64
    return x.astype(dtype)


def prepare_inputs(module, args):
    """``args`` with number lists converted and float64 inputs cast (see the module doc)."""
    out = None
    for i, x in enumerate(args):
        new = x
        if isinstance(x, (list, tuple)) and _is_numbers(x):
            new = as_array(x)
        dtype = getattr(new, "dtype", None)
        if dtype is not None and dtype == np.float64 and \
                isinstance(new, (Variable,) + cuda.array_types()):
            new = _cast_input(module, new, i)
        if new is not x:
            if out is None:
                out = list(args)
            out[i] = new
    return args if out is None else tuple(out)
