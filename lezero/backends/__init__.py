"""Backends: one object per array library, and the only place that knows which is in use.

``available()``, ``get(name)``, ``register(backend)``, ``get_backend(*arrays)``; the
``Backend`` class (``base.py``) documents the hooks.  Shipped: ``numpy`` (with the Numba
kernels), ``cupy`` (CuPy >= 13, imported lazily) and ``strict`` (a CuPy-like device on
NumPy memory for tests).  ``pytest --pyargs lezero.testing.conformance`` with
``LEZERO_BACKEND=NAME`` checks a backend.  See docs/backends.md.
"""
from lezero.backends.base import Backend, Capabilities, HostFallback
from lezero.backends.registry import (ENTRY_POINT_GROUP, available, default_device_name,
                                      devices_in_use, get, get_backend, of_namespace,
                                      register)

__all__ = ["Backend", "Capabilities", "HostFallback", "available", "get", "register",
           "get_backend", "of_namespace", "default_device_name", "devices_in_use",
           "ENTRY_POINT_GROUP"]
