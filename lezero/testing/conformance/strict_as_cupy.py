"""A pytest plugin that runs the ``gpu``-marked tests on the strict device, without a GPU:

    pytest -p lezero.testing.conformance.strict_as_cupy -m gpu tests

It installs, before any test module is imported, a ``cupy`` and a ``cupyx`` module made of
the strict device (``lezero.backends.strict``): ``import cupy`` then gives a namespace
whose arrays are strict arrays (no implicit route to the host, counted transfers), with
the parts of CuPy's API beyond NumPy's that LeZero and its tests use: ``cupy.cuda``
(``is_available``, ``Device``, ``get_current_stream``), ``asnumpy``,
``get_default_memory_pool``, ``cupyx.scatter_add`` and ``cupyx.scipy.special``.  The
``cupy`` backend then runs on it, so code written for CuPy -- the tests' ``cupy``
parametrizations, the ``cupy`` paths of the operator contract -- runs on any CPU.

What it cannot show is what the strict device cannot (docs/backends.md): kernel
compilation, cuBLAS/cuDNN numerics, streams, real out-of-memory.
"""
import sys
import types

from lezero.backends.strict import StrictDevice, counters, special_namespace
from lezero.backends.strict.xp import namespace

__all__ = ["make_cupy", "install"]


class _Stream:
    def synchronize(self):
        counters.record(sync=1, what="stream.synchronize()")


class _MemoryPool:
    """``cupy.get_default_memory_pool()`` over the strict device's byte counts."""

    def used_bytes(self):
        return counters.pool.used_bytes

    def total_bytes(self):
        return counters.pool.used_bytes

    def n_free_blocks(self):
        return 0

    def free_all_blocks(self):
        pass


def make_cupy():
    """``(cupy, cupyx)``: module stand-ins over the strict device's namespace."""
    cupy = types.ModuleType("cupy")
    cupy.__dict__.update({k: v for k, v in vars(namespace).items() if not k.startswith("__")})
    cupy.__getattr__ = lambda name: getattr(namespace, name)     # the rest, as resolved
    cupy.__version__ = "13.0.0+strict"
    cupy.cuda = types.SimpleNamespace(is_available=lambda: True, Device=StrictDevice,
                                      get_current_stream=_Stream,
                                      runtime=types.SimpleNamespace(getDeviceCount=lambda: 1))
    pool = _MemoryPool()
    cupy.get_default_memory_pool = lambda: pool
    cupyx = types.ModuleType("cupyx")
    cupyx.scatter_add = lambda a, index, values: namespace.add.at(a, index, values)
    cupyx.scipy = types.ModuleType("cupyx.scipy")
    cupyx.scipy.special = special_namespace()
    return cupy, cupyx


def install():
    """Put the stand-ins in ``sys.modules`` (``cupy``, ``cupyx``, ``cupyx.scipy``,
    ``cupyx.scipy.special``) and have the backend registry see them."""
    cupy, cupyx = make_cupy()
    sys.modules.update({"cupy": cupy, "cupyx": cupyx, "cupyx.scipy": cupyx.scipy,
                        "cupyx.scipy.special": cupyx.scipy.special})
    from lezero.backends import registry
    registry.get("cupy")
    strict = registry._loaded.pop("strict", None)
    if strict is not None:              # strict arrays now belong to the cupy backend
        registry._loaded["strict"] = strict
    registry._by_type.clear()
    registry._types_cache[0] = None
    return cupy


def pytest_configure(config):
    install()
    config.addinivalue_line("markers", "gpu: runs on the strict device standing in for CuPy")
