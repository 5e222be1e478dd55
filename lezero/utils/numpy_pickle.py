"""Unpickling NumPy values from files that may come from strangers: the allow-listed
constructors and the restricted unpickler that both ``.pt`` files (``torch_pickle``) and
CIFAR-10 batches (``lezero.data.datasets``) are read with.

A pickle is a small program: GLOBAL imports any callable, REDUCE calls it, BUILD calls
``__setstate__`` (or writes attributes).  Allowing a few names is not enough: an allowed
name can still be misused.  ``numpy.dtype`` followed by BUILD can give a structured dtype
a field past its item size (reading the array reads the heap); ``_reconstruct``,
``bytes`` or ``bytearray`` can ask for terabytes before any data is read; ``_codecs``
names decompressing codecs.  So each allowed name maps to a function of this module that
takes only what NumPy itself writes:

* ``numpy.dtype(spec)``: plain numbers only (bool, integers, floats, complex); its BUILD
  may set a byte order, once, and nothing else;
* ``_reconstruct(ndarray, (0,), ...)``: an empty placeholder that one BUILD with
  ``(version, shape, dtype, fortran, bytes)`` fills, the bytes counted against the shape
  first; ``_frombuffer`` (protocol 5) and ``scalar`` likewise;
* ``_codecs.encode(str, 'latin1')``, ``bytes``/``bytearray`` of bytes (or latin-1 text).

Dtypes and arrays are built in two steps (REDUCE, then BUILD), so they are ``Pending``
objects while the pickle runs (the memo may hand out the same one again) and ``plain``
unwraps them at the end, in one memoised walk that refuses cycles and nesting past
``MAX_DEPTH``.  The unpickler is the pure-Python one, whose memo and length fields cost
only what the file holds.  Anything refused raises ``NotAllowed`` (a
``pickle.UnpicklingError``); callers re-raise it as their format's error.
"""
import _compat_pickle
import math
import pickle
import struct

import numpy as np

from lezero.utils.files import MAX_DEPTH
from lezero.utils.safetensors import check_shape, extra_dtype_name, numeric_dtype

__all__ = ["NotAllowed", "Pending", "NumpyDtype", "NumpyArray", "NUMPY_GLOBALS",
           "RestrictedUnpickler", "plain", "MAX_DEPTH"]


class NotAllowed(pickle.UnpicklingError):
    """A pickle names a global that is not allowed, or gives an allowed one arguments or
    a state that NumPy would not write."""


class Pending:
    """A NumPy dtype or array that the pickle builds in two steps (REDUCE, then BUILD with
    its state); ``plain`` unwraps ``value`` once the pickle is done."""

    value = None          # also for one made by NEWOBJ, which skips __init__


def _text(value):
    """Python 2 pickles read with ``encoding="bytes"`` give their ``str`` as bytes."""
    return value.decode("latin1") if isinstance(value, bytes) else value


class NumpyDtype(Pending):
    """``numpy.dtype(spec, align, copy)``: only plain numbers (bool, integers, floats,
    complex).  BUILD may set the byte order (how NumPy pickles one) and nothing else: in
    NumPy's own ``__setstate__`` it could set fields at any offset (a heap read)."""

    def __init__(self, spec, align=False, copy=True):
        spec, dtype = _text(spec), None
        if isinstance(spec, str) and len(spec) <= 8 and spec.isascii():
            try:
                dtype = np.dtype(spec)
            except (TypeError, ValueError):
                pass
        if dtype is None or not numeric_dtype(dtype) or extra_dtype_name(dtype):
            raise NotAllowed(f"numpy.dtype: refusing {spec!r}: not a plain numeric dtype "
                             "(only bool, integer, float and complex dtypes load)")
        self.value, self.built = dtype, False

    def __setstate__(self, state):
        order = _text(state[1]) if isinstance(state, tuple) and len(state) > 1 else None
        plain = (isinstance(state, tuple) and len(state) in (8, 9) and state[0] in (3, 4)
                 and order in ("<", ">", "|", "=") and state[2:5] == (None, None, None)
                 and state[5:7] == (-1, -1) and (len(state) == 8 or state[8] is None))
        if getattr(self, "built", True) or not plain:
            raise NotAllowed(f"numpy.dtype: unexpected dtype state {str(state)[:300]} for "
                             f"{self.value}; refusing it (only a byte order may be set, once)")
        self.built = True
        if order in "<>" and self.value.itemsize > 1:
            self.value = self.value.newbyteorder(order)


def _dtype_of(dtype, who):
    if not isinstance(dtype, NumpyDtype) or dtype.value is None:
        raise NotAllowed(f"{who}: expected a numpy.dtype, got {type(dtype).__name__}")
    return dtype.value


def _array_from(data, dtype, shape, fortran, who):
    """A writable array of ``shape`` and ``dtype`` from the bytes ``data`` (sizes checked)."""
    dtype = _dtype_of(dtype, who)
    shape = check_shape(list(shape) if isinstance(shape, tuple) else shape, who,
                        "the array", NotAllowed)
    need = math.prod(shape) * dtype.itemsize
    if not isinstance(data, (bytes, bytearray)) or len(data) != need:
        got = len(data) if isinstance(data, (bytes, bytearray)) else type(data).__name__
        raise NotAllowed(f"{who}: {shape} {dtype} array needs {need} bytes of data, got {got}")
    return np.frombuffer(data, dtype).copy().reshape(shape, order="F" if fortran else "C")


class NumpyArray(Pending):
    """``_reconstruct(ndarray, (0,), ...)``: an array that one BUILD with
    ``(version, shape, dtype, is_fortran, bytes)`` fills, every size checked first."""

    def __setstate__(self, state):
        if self.value is not None or not isinstance(state, tuple) or len(state) not in (4, 5):
            raise NotAllowed(f"numpy array: refusing the state {str(state)[:300]}")
        shape, dtype, fortran, data = state[-4:]
        self.value = _array_from(data, dtype, shape, bool(fortran), "numpy array")


class _NdarrayName:
    """What the name ``numpy.ndarray`` unpickles to: data for ``_reconstruct``, not a
    callable (``ndarray(shape)`` would allocate whatever a file asks)."""

    def __repr__(self):
        return "numpy.ndarray"


NDARRAY = _NdarrayName()


def _reconstruct(subtype, shape, typecode=None):
    if subtype is not NDARRAY or not isinstance(shape, tuple) or shape != (0,):
        raise NotAllowed(f"numpy _reconstruct: refusing ({subtype!r}, {str(shape)[:100]}): "
                         "only an empty ndarray placeholder, filled by BUILD, is built")
    return NumpyArray()


def _frombuffer(data, dtype, shape, order):         # protocol 5, bytes in-band
    return _array_from(data, dtype, shape, order == "F", "numpy _frombuffer")


def _scalar(dtype, data=None):
    dtype = _dtype_of(dtype, "numpy scalar")
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise NotAllowed(f"numpy scalar: a {dtype} scalar needs {dtype.itemsize} bytes")
    return np.frombuffer(data, dtype)[0]


def _codecs_encode(text, encoding="utf-8"):
    """Protocol 2 writes bytes as ``_codecs.encode(str, 'latin1')``."""
    if not isinstance(text, str):
        raise NotAllowed(f"_codecs.encode: only str is encoded, got {type(text).__name__}")
    if encoding not in ("latin1", "latin-1"):
        raise NotAllowed(f"_codecs.encode: encoding {encoding!r} is not allowed (only "
                         "'latin1')")
    return text.encode("latin1")


def _copy_bytes(kind):
    """``bytes(b)`` / ``bytearray(b)`` as pickles write them (``bytearray(str, 'latin-1')``
    in protocol 2), never ``bytes(2**40)``."""
    def build(data=b"", encoding=None):
        if isinstance(data, str) and encoding is not None:
            data = _codecs_encode(data, encoding)
        if not isinstance(data, (bytes, bytearray)):
            raise NotAllowed(f"{kind.__name__}: only bytes may be copied, got "
                             f"{type(data).__name__}")
        return kind(data)
    return build


NUMPY_GLOBALS = {("numpy", "dtype"): NumpyDtype, ("numpy", "ndarray"): NDARRAY,
                 ("_codecs", "encode"): _codecs_encode, ("builtins", "bytes"): _copy_bytes(bytes),
                 ("builtins", "bytearray"): _copy_bytes(bytearray)}
for _core in ("numpy.core", "numpy._core"):
    NUMPY_GLOBALS.update({(f"{_core}.multiarray", "_reconstruct"): _reconstruct,
                          (f"{_core}.multiarray", "scalar"): _scalar,
                          (f"{_core}.numeric", "_frombuffer"): _frombuffer})


class RestrictedUnpickler(pickle._Unpickler):
    """The pure-Python unpickler, resolving globals only from ``allowed`` and letting BUILD
    give a state only to ``buildable`` objects.  (The C unpickler sizes its memo table by
    the largest index a file names -- one LONG_BINPUT of 1.4e9 took 19 GB -- and allocates
    a length field's bytes before reading them.)  ``where`` names the file in messages."""

    allowed = NUMPY_GLOBALS
    buildable = (NumpyDtype, NumpyArray)
    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, where, **kwargs):
        super().__init__(file, **kwargs)
        self.where = where

    def _load_build(self):
        state, inst = self.stack.pop(), self.stack[-1]
        if not isinstance(inst, self.buildable):
            raise NotAllowed(f"{self.where}: refusing to change {inst!r} (BUILD)")
        inst.__setstate__(state)

    def _load_bytearray8(self):     # the stock one allocates the declared length first
        self.append(bytearray(self.read(struct.unpack("<Q", self.read(8))[0])))

    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.BYTEARRAY8[0]] = _load_bytearray8

    def find_class(self, module, name):
        # protocol-2 pickles use Python 2 names (__builtin__): translate them as pickle
        # itself does, so the allow-list and the error speak Python 3
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        if (module, name) not in self.allowed:
            raise self.refused(module, name)
        return self.allowed[(module, name)]

    def refused(self, module, name):
        """The error for a global not on the allow-list."""
        return NotAllowed(f"{self.where}: unexpected object {module}.{name}")


_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))


def plain(obj, where, error, convert=None):
    """The unpickled ``obj`` as plain Python: ``Pending`` values unwrapped, anything else
    passed to ``convert`` (when given).  The walk is memoised by identity, so a shared
    reference costs one visit and stays shared (``x = [x, x]`` forty times); cycles and
    nesting past ``MAX_DEPTH`` raise ``error``."""
    done, active = {}, set()

    def walk(x, depth):
        if isinstance(x, _ATOMS):
            return x
        if id(x) in done:
            return done[id(x)]
        if id(x) in active:
            raise error(f"{where}: the object refers to itself (a reference cycle)")
        if depth > MAX_DEPTH:
            raise error(f"{where}: containers nested deeper than {MAX_DEPTH} levels")
        active.add(id(x))
        result = unwrap(x, depth + 1)
        active.discard(id(x))
        done[id(x)] = result
        return result

    def unwrap(x, depth):
        if isinstance(x, dict):
            return {walk(k, depth): walk(v, depth) for k, v in x.items()}
        if isinstance(x, (list, tuple, set, frozenset)):
            return type(x)(walk(v, depth) for v in x)
        if isinstance(x, Pending):
            if x.value is None:
                raise error(f"{where}: a numpy value without its data")
            return x.value
        return convert(x) if convert is not None else x

    return walk(obj, 0)
