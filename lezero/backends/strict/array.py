"""``StrictArray``: a device array on NumPy memory that behaves as ``cupy.ndarray`` does
where NumPy does not.

It is not an ``np.ndarray`` subclass, so code that would only work on host arrays
(``isinstance(x, np.ndarray)``, ``np.asarray(x)``, the buffer protocol, DLPack, a Numba
kernel) fails here as it would on a GPU.  What it refuses and what it counts:

* ``__array__`` raises TypeError, as CuPy's does; there is no ``__array_interface__``,
  ``__array_struct__``, buffer or ``__dlpack__``: host memory is reached only by ``.get()``;
* NumPy ufuncs and functions dispatch (``__array_ufunc__``/``__array_function__``) to
  NumPy on the unwrapped arrays, as CuPy's do to CuPy; a host ndarray operand is refused
  (Python and NumPy scalars, and 0-d host arrays, are fine);
* ``ufunc.at`` exists only for the ufuncs CuPy has it for;
* reductions and scalar indexing give 0-d device arrays, never host scalars;
* ``float()``, ``int()``, ``bool()``, ``.item()``, ``.tolist()`` and ``.get()`` are counted
  (``counters``) as synchronizations and device-to-host transfers.
"""
import weakref

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from lezero.backends.strict import counters

__all__ = ["StrictArray", "wrap", "unwrap", "kind_of", "KINDS", "AT_UFUNCS"]

# The ufuncs whose .at CuPy (>= 13) implements.
AT_UFUNCS = frozenset({"add", "subtract", "maximum", "minimum", "bitwise_and",
                       "bitwise_or", "bitwise_xor"})

# The stack of current device ids (``with backend.device(i):`` pushes one).
CURRENT = [0]

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` "
             "to construct a NumPy array explicitly.")

# Methods and properties of cupy.ndarray that run on the device (no host round trip).
_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "choose", "clip",
    "compress", "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot", "fill",
    "flatten", "max", "mean", "min", "nonzero", "partition", "prod", "put", "ravel",
    "repeat", "reshape", "round", "sort", "squeeze", "std", "sum", "swapaxes", "take",
    "trace", "transpose", "var", "view"})
_PROPERTIES = frozenset({"shape", "dtype", "ndim", "size", "itemsize", "nbytes", "strides",
                         "flags", "T", "real", "imag"})


def _host_refused(where):
    return TypeError(f"strict device: {where} got a host numpy.ndarray; move it to the "
                     "device first (xp.asarray), as CuPy refuses it (TypeError: "
                     "Unsupported type <class 'numpy.ndarray'>)")


def unwrap(x, where="operation"):
    """The NumPy memory behind device arrays in ``x`` (nested tuples/lists/dicts too);
    a host ndarray with dimensions raises TypeError."""
    t = type(x)
    if t in KINDS:
        return x._a
    if t is np.ndarray:
        if x.ndim:
            raise _host_refused(where)
        return x
    if t is tuple or t is list:
        return t(unwrap(v, where) for v in x)
    if t is dict:
        return {k: unwrap(v, where) for k, v in x.items()}
    return x


def wrap(x, kind=None):
    """Device arrays (of class ``kind``, default ``StrictArray``) for the NumPy results in
    ``x``; NumPy scalars become 0-d arrays."""
    t = type(x)
    if t is np.ndarray:
        return (kind or StrictArray)(x)
    if isinstance(x, np.generic):
        return (kind or StrictArray)(np.asarray(x))
    if t is tuple or t is list:
        return t(wrap(v, kind) for v in x)
    return x


def kind_of(args, default=None):
    """The device array class of the first device array in ``args`` (one level of
    tuples/lists looked into), else ``default``: results take their operands' class."""
    for a in args:
        t = type(a)
        if t in KINDS:
            return t
        if (t is tuple or t is list) and a:
            found = kind_of(a)
            if found is not None:
                return found
    return default


def _index(key):
    """An index for NumPy: device arrays unwrapped; host index arrays are uploads."""
    if type(key) is not tuple:
        key = (key,)
    out = []
    for k in key:
        if type(k) in KINDS:
            k = k._a
        elif type(k) is np.ndarray or type(k) is list:
            counters.record(h2d=1, what="host index upload")
        out.append(k)
    return tuple(out)


class StrictArray(NDArrayOperatorsMixin):
    """A strict-device array over a NumPy array it owns or views (``_a``)."""

    __slots__ = ("_a", "_base", "_dev", "__weakref__")
    __hash__ = None

    def __init__(self, array):
        self._a = array
        self._base = None
        self._dev = CURRENT[-1]             # new arrays land on the current device
        if array.base is None:
            counters.pool.allocate(self, array.nbytes)
            _owners[id(array)] = self
        else:
            self._base = _owner_of(array)

    @property
    def base(self):
        """The device array owning this view's memory (None for an owner), one object per
        memory block as on CuPy, so ``id`` of the root identifies the memory."""
        return self._base

    # ----- host access: refused implicitly, counted explicitly ----------------------------
    def __array__(self, *args, **kwargs):
        raise TypeError(_IMPLICIT)

    def get(self, stream=None, order="C", out=None):
        """A NumPy copy on the host (counted as a synchronization and a transfer)."""
        counters.record(sync=1, d2h=1, what=".get()")
        host = np.array(self._a, order=order, copy=True)
        if out is not None:
            out[...] = host
            return out
        return host

    def _scalar(self, what):
        counters.record(sync=1, d2h=1, what=what)
        return self._a

    def item(self, *args):
        return self._scalar(".item()").item(*args)

    def tolist(self):
        return self._scalar(".tolist()").tolist()

    def __float__(self):
        return float(self._scalar("float()"))

    def __int__(self):
        return int(self._scalar("int()"))

    def __index__(self):
        return self._scalar("__index__").__index__()

    def __complex__(self):
        return complex(self._scalar("complex()"))

    def __bool__(self):
        return bool(self._scalar("bool()"))

    def __repr__(self):
        return repr(self._scalar("repr()")).replace("array(", "strict_array(", 1)

    def __str__(self):
        return str(self._scalar("str()"))

    def __reduce__(self):
        return (_rebuild, (self.get(),))

    def __copy__(self):
        return type(self)(self._a.copy())

    def __deepcopy__(self, memo):
        return type(self)(self._a.copy())

    # ----- device behaviour --------------------------------------------------------------
    @property
    def device(self):
        from lezero.backends.strict import StrictDevice
        return StrictDevice(self._dev)

    def __getattr__(self, name):
        if name in _PROPERTIES:
            return wrap(getattr(self._a, name), type(self))
        if name in _METHODS:
            method = getattr(self._a, name)
            return lambda *args, **kwargs: _call(method, args, kwargs, name, type(self))
        raise AttributeError(f"'StrictArray' (a strict-device array, as cupy.ndarray) has "
                             f"no attribute {name!r}")

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        for i in range(len(self._a)):
            yield self[i]

    def __getitem__(self, key):
        return wrap(self._a[_index(key)], type(self))

    def __setitem__(self, key, value):
        self._a[_index(key)] = unwrap(value, "__setitem__")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = f"{ufunc.__name__}.{method}" if method != "__call__" else ufunc.__name__
        if method == "at" and ufunc.__name__ not in AT_UFUNCS:
            raise TypeError(f"strict device: {name} does not exist on CuPy (ufunc.at: "
                            f"{', '.join(sorted(AT_UFUNCS))})")
        return _call(getattr(ufunc, method), inputs, kwargs, name, kind_of(inputs))

    def __array_function__(self, func, types, args, kwargs):
        return _call(func, args, kwargs, func.__name__, kind_of(args, type(self)))


#: the device array classes: StrictArray and the subclasses of devices built on it
#: (``StrictBackend(kind=...)``, e.g. a float32-only chip); results keep their class
KINDS = {StrictArray}

_owners = weakref.WeakValueDictionary()    # id(root ndarray) -> its StrictArray


def _owner_of(array):
    """The StrictArray over the ndarray that owns ``array``'s memory (made if none is)."""
    root = array
    while root.base is not None and isinstance(root.base, np.ndarray):
        root = root.base
    owner = _owners.get(id(root))
    if owner is None or owner._a is not root:
        owner = StrictArray(root) if root.base is None else _Foreign(root)
    return owner


def _call(fn, args, kwargs, name, kind=None):
    """Run a NumPy callable on unwrapped device arrays and wrap what it returns (as
    ``kind``); ``out=`` arrays are returned as the caller passed them."""
    out = kwargs.get("out")
    result = fn(*unwrap(args, name), **unwrap(kwargs, name))
    if out is not None:
        return out[0] if type(out) is tuple and len(out) == 1 else out
    return wrap(result, kind)


def _rebuild(host):
    counters.record(h2d=1, what="unpickle")
    return StrictArray(host)


class _Foreign:
    """The base of memory NumPy got from elsewhere (a buffer): stands as the root."""
    base = None

    def __init__(self, root):
        self._a = root
