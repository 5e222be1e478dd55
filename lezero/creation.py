"""PyTorch's tensor constructors: ``lz.tensor``, ``lz.zeros``, ``lz.randn``, ``lz.arange``...

They return Variables and take torch's arguments (``*size`` or one tuple, ``dtype=``,
``requires_grad=``, ``device=``).  Two choices, both PyTorch's (docs/pytorch_manners.md):

* ``requires_grad`` defaults to **False**: a constructed tensor is data, not a trainable
  leaf.  ``lz.Variable(data)`` keeps DeZero's default (a leaf that receives ``.grad``).
* Floating results default to **float32**; ``lz.tensor`` keeps a NumPy array's own dtype
  (float64 stays float64, as ``torch.tensor`` does) and turns Python floats into float32.

Random tensors draw from the process generator (``lz.manual_seed``).  On ``device="cuda"``
a tensor is built on the host and copied over, so a seed gives the same values anywhere.
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable, as_array
from lezero.functions import concatenate, stack
from lezero.functions.tensor_methods import move_array, parse_device, parse_dtype
from lezero.random import get_rng
from lezero.utils.checks import check_bool, check_int, check_number, check_type, describe

__all__ = ["tensor", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "rand", "randn", "randint", "arange",
           "linspace", "cat", "stack"]

cat = concatenate     # PyTorch's name (takes dim= as every operator does)


def _finish(where, array, dtype, requires_grad, device):
    """The Variable for ``array`` cast to ``dtype`` and moved to ``device``."""
    check_bool(where, "requires_grad", requires_grad)
    if dtype is not None:
        dtype = parse_dtype(where, dtype)
        if array.dtype != dtype:
            array = array.astype(dtype)
    if requires_grad and array.dtype.kind != "f" and array.dtype.name != "bfloat16":
        raise TypeError(f"{where}: only floating tensors can require gradients, got dtype "
                        f"{array.dtype}")
    if device is not None:
        array = move_array(array, parse_device(where, device))
    return Variable(array, requires_grad=requires_grad)


def _size(where, size):
    """A shape from ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(check_int(where, "size", n, low=0) for n in size)


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new Variable holding a copy of ``data`` (numbers, nested lists, an array or a
    Variable, whose graph is left behind)."""
    if isinstance(data, Variable):
        data = data.data
    if isinstance(data, cuda.array_types()):
        array = data.copy()
    else:
        array = as_array(data)
        if isinstance(data, np.ndarray):
            array = array.copy()
    return _finish("tensor", array, dtype, requires_grad, device)


def from_numpy(array):
    """A Variable sharing ``array``'s memory (writes show through both ways)."""
    check_type("from_numpy", "array", array, np.ndarray, "a NumPy array")
    return Variable(array, requires_grad=False)


def _filled(where, value):
    def make(*size, dtype=None, requires_grad=False, device=None):
        shape = _size(where, size)
        array = np.full(shape, value, dtype=np.float32 if dtype is None else
                        parse_dtype(where, dtype))
        return _finish(where, array, None, requires_grad, device)
    make.__name__ = where
    make.__doc__ = (f"A Variable of {'zeros' if value == 0 else 'ones'} with the given size "
                    "(float32 unless ``dtype``).")
    return make


zeros = _filled("zeros", 0)
ones = _filled("ones", 1)


def empty(*size, dtype=None, requires_grad=False, device=None):
    """A Variable of the given size whose values are not set."""
    shape = _size("empty", size)
    array = np.empty(shape, dtype=np.float32 if dtype is None else parse_dtype("empty", dtype))
    return _finish("empty", array, None, requires_grad, device)


def _fill_dtype(where, fill_value):
    if isinstance(fill_value, (bool, np.bool_)):
        return np.bool_
    check_number(where, "fill_value", fill_value)
    return np.int64 if isinstance(fill_value, (int, np.integer)) else np.float32


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    """A Variable of ``size`` filled with ``fill_value`` (its dtype follows the value:
    int64 for an int, bool for a bool, float32 for a float, as in PyTorch)."""
    shape = _size("full", (size,) if not isinstance(size, (tuple, list)) else (tuple(size),))
    dtype = _fill_dtype("full", fill_value) if dtype is None else parse_dtype("full", dtype)
    return _finish("full", np.full(shape, fill_value, dtype=dtype), None, requires_grad, device)


def _like(where, x):
    check_type(where, "input", x, (Variable,) + cuda.array_types(), "a Variable or an array")
    data = x.data if isinstance(x, Variable) else x
    return data.shape, data.dtype, cuda.device_of(data)


def _filled_like(where, input, value, dtype, requires_grad, device):
    shape, own, at = _like(where, input)
    dtype = own if dtype is None else parse_dtype(where, dtype)
    array = np.empty(shape, dtype) if value is None else np.full(shape, value, dtype)
    return _finish(where, array, None, requires_grad, at if device is None else device)


def zeros_like(input, dtype=None, requires_grad=False, device=None):
    """Zeros with ``input``'s shape, dtype and device (unless given)."""
    return _filled_like("zeros_like", input, 0, dtype, requires_grad, device)


def ones_like(input, dtype=None, requires_grad=False, device=None):
    """Ones with ``input``'s shape, dtype and device (unless given)."""
    return _filled_like("ones_like", input, 1, dtype, requires_grad, device)


def empty_like(input, dtype=None, requires_grad=False, device=None):
    """Unset values with ``input``'s shape, dtype and device (unless given)."""
    return _filled_like("empty_like", input, None, dtype, requires_grad, device)


def full_like(input, fill_value, dtype=None, requires_grad=False, device=None):
    """``fill_value`` with ``input``'s shape, dtype and device (unless given)."""
    if not isinstance(fill_value, (bool, np.bool_)):
        check_number("full_like", "fill_value", fill_value)
    return _filled_like("full_like", input, fill_value, dtype, requires_grad, device)


def _random(where, draw):
    def make(*size, dtype=None, requires_grad=False, device=None):
        shape = _size(where, size)
        dtype = np.dtype(np.float32) if dtype is None else parse_dtype(where, dtype)
        if dtype.kind != "f":
            raise TypeError(f"{where}: dtype must be a floating dtype, got {dtype}")
        native = dtype if dtype in (np.float32, np.float64) else np.float32
        return _finish(where, draw(get_rng(), shape, native), dtype, requires_grad, device)
    make.__name__ = where
    return make


rand = _random("rand", lambda rng, shape, dtype: rng.random(shape, dtype=dtype))
rand.__doc__ = "Uniform samples in [0, 1) from the process generator (float32)."
randn = _random("randn", lambda rng, shape, dtype: rng.standard_normal(shape, dtype=dtype))
randn.__doc__ = "Standard normal samples from the process generator (float32)."


def randint(*args, size=None, dtype=None, requires_grad=False, device=None):
    """Integers in [low, high) from the process generator: ``randint(high, size)`` or
    ``randint(low, high, size)`` (int64 unless ``dtype``)."""
    if size is None and args and isinstance(args[-1], (tuple, list)):
        args, size = args[:-1], args[-1]
    if size is None or len(args) not in (1, 2):
        raise TypeError(f"randint: expected randint(high, size) or randint(low, high, size), "
                        f"got {len(args)} bounds and size={describe(size)}")
    low, high = (0, args[0]) if len(args) == 1 else args
    low, high = check_int("randint", "low", low), check_int("randint", "high", high)
    if high <= low:
        raise ValueError(f"randint: high must be greater than low, got low={low}, high={high}")
    array = get_rng().integers(low, high, size=_size("randint", (size,)), dtype=np.int64)
    return _finish("randint", array, dtype, requires_grad, device)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None):
    """``[start, end)`` by ``step`` (``arange(end)`` counts from 0); int64 when every bound
    is an int, float32 otherwise."""
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        check_number("arange", name, value)
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    if dtype is None:
        dtype = np.int64 if ints else np.float32
    # Count in float64, then cast: the length and values PyTorch gives for float steps.
    n = max(0, int(np.ceil((end - start) / step)))
    array = start + step * np.arange(n, dtype=np.float64) if not ints else \
        np.arange(start, end, step, dtype=np.int64)
    return _finish("arange", array, dtype, requires_grad, device)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (float32)."""
    check_number("linspace", "start", start)
    check_number("linspace", "end", end)
    steps = check_int("linspace", "steps", steps, low=0)
    array = np.linspace(start, end, steps, dtype=np.float64)
    return _finish("linspace", array, np.float32 if dtype is None else dtype, requires_grad,
                   device)
