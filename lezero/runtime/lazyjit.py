"""Numba, imported on first use, and kernels that compile when first called.

``@jit(...)`` records a function as a ``Kernel``; its first call imports Numba, compiles
every kernel of its module (``cache=True``: later processes load them from disk) and
replaces the module's names with the compiled ones, so kernels calling each other, across
modules too, see compiled code.  ``prange`` and ``uint64`` stand for Numba's until then.
Importing a kernel module therefore costs nothing, and ``import lezero`` never imports
Numba.  The runtime's own Numba code (the atomic counters of ``waits``) and every
``lezero.kernels`` module are bound this way.
"""
import functools
import sys
import threading

__all__ = ["numba_available", "numba_module", "jit", "intrinsic", "load", "prange",
           "uint64", "Kernel"]

_numba = None          # the numba module once imported, False when it cannot be
_bound = set()         # names of the kernel modules whose kernels are compiled
# Binding replaces a module's names one by one, so another thread (the parts of a split
# kernel run on several) must not compile against a half-bound module: binding holds
# this lock, and a kernel skips it only once its module is in ``_complete``.
_bind_lock = threading.RLock()
_complete = set()


def numba_module():
    """The ``numba`` module, imported on first use; None when it is not installed."""
    global _numba
    if _numba is None:
        try:
            import numba
            _numba = numba
        except ImportError:
            _numba = False
    return _numba or None


def numba_available():
    """True when Numba can be imported (checked once)."""
    return numba_module() is not None


class _NumbaName:
    """A name a kernel body uses (``prange``, ``uint64``) that is Numba's once bound."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<numba.{self.name}, bound on first use>"


prange = _NumbaName("prange")
uint64 = _NumbaName("uint64")


class Kernel:
    """A function that Numba compiles on first use (made by ``jit`` and ``intrinsic``)."""

    def __init__(self, fn, make):
        functools.update_wrapper(self, fn)
        self.py_func = fn
        self._make = make
        self._compiled = None

    def compiled(self):
        """The Numba dispatcher (binding this kernel's module on first use)."""
        if self._compiled is None or self.py_func.__module__ not in _complete:
            with _bind_lock:
                _bind_all(sys.modules[self.py_func.__module__])
                self._build(numba_module())        # also when no module name holds it
        return self._compiled

    def _build(self, numba):
        if self._compiled is None:
            self._compiled = self._make(numba)(self.py_func)
        return self._compiled

    def __call__(self, *args):
        return self.compiled()(*args)

    def __repr__(self):
        return f"<kernel {self.py_func.__module__}.{self.py_func.__qualname__}>"


def jit(**options):
    """``numba.njit(**options)``, applied on first use."""
    return lambda fn: Kernel(fn, lambda numba: numba.njit(**options))


def intrinsic(fn):
    """``numba.extending.intrinsic``, applied on first use."""
    def make(numba):
        from numba.extending import intrinsic as numba_intrinsic
        return numba_intrinsic
    return Kernel(fn, make)


def load(module):
    """Bind ``module``'s kernels now (for Numba code outside LeZero that calls them, such
    as a test's own jitted loop around ``fastexp.exp32``); returns the module."""
    with _bind_lock:
        _bind_all(module)
    return module


def _bind_all(module):
    """``_bind(module)``; then its modules are complete (the caller holds ``_bind_lock``)."""
    _bind(module)
    _complete.update(_bound)


def _bind(module):
    """Compile (lazily, as Numba does) every kernel in ``module``'s names and in the
    modules they come from, and put the compiled objects in their places."""
    if module.__name__ in _bound:
        return
    numba = numba_module()
    if numba is None:
        raise ImportError("lezero: this kernel needs Numba (pip install numba); "
                          "operators fall back to NumPy when it is missing")
    _bound.add(module.__name__)
    names = vars(module)
    for key, value in list(names.items()):
        if isinstance(value, Kernel):
            names[key] = value._build(numba)
            _bind(sys.modules[value.py_func.__module__])
        elif isinstance(value, _NumbaName):
            names[key] = getattr(numba, value.name)
