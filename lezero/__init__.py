"""LeZero: a readable define-by-run deep learning framework on NumPy (CPU) and CuPy (GPU).

    import lezero as lz
    import lezero.functions as F

Importing lezero loads no optional dependency (mpi4py, cupy, onnx, torch, matplotlib).
"""
from lezero import runtime  # noqa: F401  first: settles BLAS's threads before NumPy loads
from lezero.core import (Config, Function, FunctionHook, Parameter, Variable, as_array,
                         as_variable, enable_grad, grad, no_grad, test_mode, using_config)
from lezero.random import get_rng, manual_seed
from lezero import cuda
from lezero import kernels
from lezero import functions
from lezero import utils
from lezero.utils.profiling import TimerHook
from lezero.creation import *              # noqa: F401,F403  (torch's constructors)
from lezero.creation import __all__ as _creation
from lezero.grad_mode import inference_mode, is_grad_enabled, set_grad_enabled

__version__ = "0.1.0"

__all__ = ["Variable", "Parameter", "Function", "Config", "using_config", "no_grad",
           "enable_grad", "test_mode", "grad", "manual_seed", "get_rng", "FunctionHook",
           "TimerHook", "as_array", "as_variable", "cuda", "functions", "utils",
           "inference_mode", "is_grad_enabled", "set_grad_enabled"] + list(_creation)

# Subpackages and names that pull in more code load on first use, keeping import light.
_LAZY_MODULES = {"nn", "optim", "data", "amp", "quantization", "parallel", "distributed",
                 "jit", "onnx", "serving", "testing", "convert"}
_LAZY_NAMES = {
    "checkpoint": ("lezero.checkpoint", "checkpoint"),
    "checkpoint_sequential": ("lezero.checkpoint", "checkpoint_sequential"),
    "memory": ("lezero.utils.memory", None),
    "save": ("lezero.utils.serialization", "save"),
    "load": ("lezero.utils.serialization", "load"),
    # the base of every loader's error (one subclass per format, each naming the file)
    "FileFormatError": ("lezero.utils.files", "FileFormatError"),
}


def __getattr__(name):
    import importlib
    if name in _LAZY_MODULES:
        return importlib.import_module(f"lezero.{name}")
    if name in _LAZY_NAMES:
        module, attr = _LAZY_NAMES[name]
        mod = importlib.import_module(module)
        return mod if attr is None else getattr(mod, attr)
    raise AttributeError(f"module 'lezero' has no attribute {name!r}")


import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _Package(_types.ModuleType):
    """``import lezero.checkpoint`` sets the attribute ``lezero.checkpoint`` to the
    module; a lazy name that shares its module's name stays the function instead."""

    def __setattr__(self, name, value):
        lazy = _LAZY_NAMES.get(name)
        if lazy is not None and lazy[1] is not None and getattr(value, "__name__", None) \
                == lazy[0]:
            value = getattr(value, lazy[1])
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
