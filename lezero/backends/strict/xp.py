"""The strict device's array namespace: what operators use from ``cupy``, on NumPy.

``namespace`` answers ``xp.<name>`` as CuPy would: dtypes and constants as NumPy's, every
function and ufunc run by NumPy on the unwrapped device arrays with device arrays back
(a host ndarray argument raises TypeError, except in the uploads ``asarray``/``array``);
``ufunc.at`` only where CuPy has it; ``xp.random`` with CuPy's generator method set only;
``xp.asnumpy`` counted as a transfer; ``xp.ndarray`` the device array type; sorts are
stable and ``linalg``'s solvers answer nan instead of raising, as CuPy's.
"""
import types

import numpy as np

from lezero.backends.strict import counters
from lezero.backends.strict.array import AT_UFUNCS, KINDS, StrictArray, kind_of, unwrap, wrap
from lezero.backends.strict.rng import random_namespace

__all__ = ["namespace", "make_namespace", "upload", "special_namespace"]

_UPLOADS = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray",
                      "asfortranarray"})


def upload(fn, name, kind=StrictArray):
    """``xp.asarray`` and friends: host data becomes device data (counted)."""
    def call(obj, *args, **kwargs):
        if type(obj) in KINDS:
            raw = fn(obj._a, *args, **kwargs)
            return obj if raw is obj._a else type(obj)(raw)
        counters.record(h2d=1, what=f"xp.{name}")
        raw = fn(unwrap(obj, name) if type(obj) is not np.ndarray else obj, *args, **kwargs)
        if raw is obj or raw.base is not None:
            raw = raw.copy()            # device memory never aliases host memory
        return kind_of((obj,), kind)(raw)
    call.__name__ = name
    return call


def device_function(fn, name, kind=StrictArray):
    """A NumPy function over device arrays (host ndarrays refused); results take the
    class of the first device operand, else ``kind`` (``xp.zeros``: the namespace's)."""
    def call(*args, **kwargs):
        out = kwargs.get("out")
        result = fn(*unwrap(args, f"xp.{name}"), **unwrap(kwargs, f"xp.{name}"))
        return out if out is not None else wrap(result, kind_of(args, kind))
    call.__name__ = name
    call.__doc__ = fn.__doc__
    return call


class Ufunc:
    """A NumPy ufunc as CuPy's: called on device arrays, ``.at`` only where CuPy has it."""

    def __init__(self, ufunc, kind=StrictArray):
        self._ufunc, self._kind = ufunc, kind
        self.__name__ = ufunc.__name__
        self._call = device_function(ufunc, ufunc.__name__, kind)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name):
        if name == "at" and self.__name__ not in AT_UFUNCS:
            raise AttributeError(f"strict device: {self.__name__}.at does not exist on CuPy")
        attr = getattr(self._ufunc, name)
        if not callable(attr):
            return attr
        return device_function(attr, f"{self.__name__}.{name}", self._kind)

    def __repr__(self):
        return f"<strict ufunc {self.__name__!r}>"


def asnumpy(a, stream=None, order="C", out=None):
    """``cupy.asnumpy``: a host copy (device arrays counted as transfers)."""
    if type(a) in KINDS:
        return a.get(order=order, out=out)
    return np.asarray(a, order=order)


def get_array_module(*args):
    """``cupy.get_array_module``: this namespace when any argument is a device array."""
    return namespace if any(type(a) in KINDS for a in args) else np


class Namespace(types.ModuleType):
    """A module-like view of a NumPy module (``numpy``, ``numpy.linalg``, ...) over the
    strict device; attributes are resolved on first use and kept."""

    def __init__(self, name, source, extra=None, kind=StrictArray):
        super().__init__(name)
        self._source, self._kind = source, kind
        for key, value in (extra or {}).items():
            setattr(self, key, value)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            obj = getattr(self._source, name)
        except AttributeError:
            raise AttributeError(f"module {self.__name__!r} (the strict device) has no "
                                 f"attribute {name!r}") from None
        value = _adapt(obj, name, f"{self.__name__}.{name}", self._kind)
        setattr(self, name, value)
        return value


def _adapt(obj, name, qualified, kind):
    if isinstance(obj, np.ufunc):
        return Ufunc(obj, kind)
    if isinstance(obj, types.ModuleType):
        return Namespace(qualified, obj, kind=kind)
    if isinstance(obj, type) or not callable(obj):
        return obj                      # dtypes, classes, constants
    if name in _UPLOADS:
        return upload(obj, name, kind)
    return device_function(obj, name, kind)


def _stable(fn):
    """``sort``/``argsort`` as CuPy's: always stable (a radix sort), whatever ``kind``."""
    def call(a, axis=-1, kind=None, **kwargs):
        return fn(a, axis=axis, kind="stable", **kwargs)
    return call


def _nan_on_failure(fn, shape_of):
    """A ``numpy.linalg`` solver as cuSOLVER's under CuPy: a singular (or not positive
    definite) input gives non-finite values, not an error (CuPy raises only inside
    ``cupyx.errstate(linalg='raise')``)."""
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except np.linalg.LinAlgError:
            return np.full(shape_of(*args), np.nan, dtype=np.result_type(*args, np.float32))
    return call


def _linalg(kind):
    solve_shape = (lambda a, b: np.linalg.solve(np.broadcast_to(np.eye(a.shape[-1]), a.shape),
                                                b).shape)
    return Namespace("strict.linalg", np.linalg, {
        name: device_function(_nan_on_failure(getattr(np.linalg, name), shape), name, kind)
        for name, shape in (("inv", np.shape), ("cholesky", np.shape),
                            ("solve", solve_shape))}, kind=kind)


def make_namespace(name, kind=StrictArray, generator=None):
    """The array namespace of a device on strict memory whose arrays are ``kind`` (a
    ``StrictArray`` subclass, added to ``KINDS``) and whose ``random.default_rng`` makes
    ``generator`` (default: the strict ``Generator``)."""
    KINDS.add(kind)
    return Namespace(name, np, {
        "ndarray": kind, "asnumpy": asnumpy, "get_array_module": get_array_module,
        "random": random_namespace(kind, generator), "linalg": _linalg(kind),
        "sort": device_function(_stable(np.sort), "sort", kind),
        "argsort": device_function(_stable(np.argsort), "argsort", kind),
    }, kind=kind)


namespace = make_namespace("strict")


_special = []


def special_namespace():
    """``cupyx.scipy.special`` of the strict device: SciPy's, over device arrays."""
    if not _special:
        import scipy.special
        _special.append(Namespace("strict.special", scipy.special))
    return _special[0]
