"""Which backends exist and which one an array belongs to.

Built-in backends are named here and imported on first use; plugins register with
``register(backend)`` or an entry point in the group ``lezero.backends`` (an object that
is a ``Backend``, or a callable returning one), loaded the first time ``available()``,
``get()`` or an unknown array type asks.  ``get_backend(*arrays)`` is what
``cuda.get_array_module`` builds on: the backend of the first device array among the
arguments (Variables are looked through), else ``numpy``.  ``LEZERO_BACKEND=NAME`` names
the device ``to_gpu()``/``to_device()`` move to (default ``cupy``).
"""
import importlib
import os
import sys

import numpy as np

from lezero.backends.base import Backend

__all__ = ["available", "get", "register", "get_backend", "of_namespace", "array_types",
           "default_device_name", "devices_in_use",
           "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "lezero.backends"

# name -> ("module:factory", module whose presence in sys.modules means arrays may exist)
_BUILTIN = {
    "numpy": ("lezero.backends.numpy_backend:NumpyBackend", "numpy"),
    "cupy": ("lezero.backends.cupy_backend:CupyBackend", "cupy"),
    "strict": ("lezero.backends.strict:StrictBackend", "lezero.backends.strict.array"),
}
_loaded = {}            # name -> Backend
_plugins = {}           # name -> entry point, not loaded yet
_scanned = False
_by_type = {}           # array type -> Backend, or None (host/scalar), or _LOOK_INSIDE
_LOOK_INSIDE = object()  # a Variable-like: its .data decides
_MISSING = object()
_types_cache = [None, (np.ndarray,)]
_host = []              # the numpy backend, once made


def _scan_entry_points():
    global _scanned
    if _scanned:
        return
    _scanned = True
    from importlib.metadata import entry_points
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _BUILTIN and ep.name not in _loaded:
            _plugins[ep.name] = ep


def available():
    """Names of the registered backends (built-ins, registered, entry points)."""
    _scan_entry_points()
    return list(dict.fromkeys([*_BUILTIN, *_loaded, *_plugins]))


def get(name):
    """The backend called ``name`` (ValueError listing the known names otherwise)."""
    backend = _loaded.get(name)
    if backend is not None:
        return backend
    if name in _BUILTIN:
        module, factory = _BUILTIN[name][0].split(":")
        return _install(getattr(importlib.import_module(module), factory)())
    _scan_entry_points()
    if name in _plugins:
        obj = _plugins.pop(name).load()
        return _install(obj if isinstance(obj, Backend) else obj())
    raise ValueError(f"lezero.backends.get: no backend {name!r}; available: "
                     f"{', '.join(available())} (LEZERO_BACKEND, register(), or an entry "
                     f"point in the group {ENTRY_POINT_GROUP!r})")


def register(backend):
    """Add (or replace) a backend; returns it."""
    if not isinstance(backend, Backend):
        raise TypeError(f"lezero.backends.register: expected a Backend, got "
                        f"{type(backend).__name__}")
    return _install(backend)


def _install(backend):
    _loaded[backend.name] = backend
    _by_type.clear()
    _types_cache[0] = None
    return backend


def default_device_name():
    """The device ``to_gpu()``/``to_device()`` use: ``LEZERO_BACKEND``, else ``cupy``."""
    return os.environ.get("LEZERO_BACKEND") or "cupy"


def get_backend(*arrays):
    """The backend of the first device array among ``arrays`` (Variables looked
    through), else the ``numpy`` backend.  Called by every operator: host arrays and
    Variables holding them cost a type lookup each."""
    for x in arrays:
        t = type(x)
        if t is np.ndarray:
            continue
        found = _by_type.get(t, _MISSING)
        if found is _MISSING:
            found = _by_type[t] = _classify(x)
        if found is _LOOK_INSIDE:
            data = getattr(x, "data", None)
            if type(data) is np.ndarray:
                continue
            found = _device_backend(data)
        if found is not None:
            return found
    return _host[0] if _host else _host_backend()


def _host_backend():
    _host.append(get("numpy"))
    return _host[0]


def of_namespace(xp):
    """The backend whose array namespace is ``xp`` (for code that holds ``xp``, not an
    array: ``get_rng(xp)``, a receive buffer's device); ValueError when none is."""
    if xp is np:
        return _loaded.get("numpy") or get("numpy")
    for backend in _candidates():
        if backend.name != "numpy" and backend.has_namespace(xp):
            return backend
    raise ValueError(f"lezero.backends: no loaded backend has the namespace {xp!r}")


def devices_in_use():
    """The device (non-``numpy``) backends that may hold arrays now and have a device:
    what code that acts on every device (seeding, swapping generators, reading memory
    pools) loops over.  Imports no device library."""
    return [b for b in _candidates() if b.name != "numpy" and b.is_available()]


def array_types():
    """``np.ndarray`` and the array types of every device backend that may hold arrays
    (recomputed when a backend is installed or a module is imported: a device library
    or a plugin may have arrived)."""
    key = (sys.modules.get("cupy"), len(sys.modules), len(_loaded))
    if _types_cache[0] != key:
        types = [np.ndarray]
        for backend in _candidates():
            types.extend(t for t in backend.array_types if t not in types)
        key = (sys.modules.get("cupy"), len(sys.modules), len(_loaded))
        _types_cache[:] = [key, tuple(types)]
    return _types_cache[1]


def _device_backend(x):
    """The non-host backend ``x`` (an array or a Variable) lives on, else None."""
    t = type(x)
    if t is np.ndarray:
        return None
    found = _by_type.get(t, _MISSING)
    if found is _MISSING:
        found = _by_type[t] = _classify(x)
    if found is _LOOK_INSIDE:
        inner = getattr(x, "data", None)
        # a torch tensor's .data is a tensor again: not a Variable, no backend of ours
        return None if type(inner) is t else _device_backend(inner)
    return found


def _classify(x):
    """What an object's type says about its backend: a Backend, None (host data or a
    scalar) or _LOOK_INSIDE (a Variable: its ``.data`` decides)."""
    if x is None or isinstance(x, (np.generic, int, float, complex, str, bytes)):
        return None
    devices = [b for b in _candidates() if b.name != "numpy"]
    for backend in devices:             # the exact class first: a device whose arrays
        if type(x) in backend.array_types:  # subclass another's (a chip on strict memory)
            return backend
    for backend in devices:
        if isinstance(x, backend.array_types):
            return backend
    if hasattr(x, "data"):
        return _LOOK_INSIDE
    return None


def _candidates():
    """Loaded backends, after loading those whose arrays may now exist: built-ins whose
    module is imported, and entry points whose module is imported."""
    for name, (_, marker) in _BUILTIN.items():
        if name not in _loaded and marker in sys.modules:
            get(name)
    _scan_entry_points()
    for name, ep in list(_plugins.items()):
        if ep.module in sys.modules or ep.module.split(".")[0] in sys.modules:
            get(name)
    return list(_loaded.values())
