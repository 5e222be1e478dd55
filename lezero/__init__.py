"""LeZero: a readable define-by-run deep learning framework on NumPy (CPU) and CuPy (GPU).

    import lezero as lz
    import lezero.functions as F

Importing lezero loads no optional dependency (mpi4py, cupy, onnx, torch, matplotlib).
"""
from lezero.core import (Config, Function, FunctionHook, Parameter, TimerHook, Variable,
                         as_array, as_variable, enable_grad, get_rng, grad, manual_seed,
                         no_grad, test_mode, using_config)
from lezero.core import host_memory as _host_memory
from lezero import cuda
from lezero import functions
from lezero import utils

__version__ = "0.1.0"

# Freed arrays are reused instead of returned to the OS (page faults were a fifth of a
# training step); LEZERO_HOST_ALLOCATOR=system opts out.  See lezero/core/host_memory.py.
_host_memory.apply_default()

__all__ = ["Variable", "Parameter", "Function", "Config", "using_config", "no_grad",
           "enable_grad", "test_mode", "grad", "manual_seed", "get_rng", "FunctionHook",
           "TimerHook", "as_array", "as_variable", "cuda", "functions", "utils"]

# Subpackages and names that pull in more code load on first use, keeping import light.
_LAZY_MODULES = {"nn", "optim", "data", "amp", "quantization", "parallel", "jit", "onnx",
                 "serving", "kernels", "convert"}
_LAZY_NAMES = {
    "checkpoint": ("lezero.checkpoint", "checkpoint"),
    "checkpoint_sequential": ("lezero.checkpoint", "checkpoint_sequential"),
    "save": ("lezero.utils.serialization", "save"),
    "load": ("lezero.utils.serialization", "load"),
}


def __getattr__(name):
    import importlib
    if name in _LAZY_MODULES:
        return importlib.import_module(f"lezero.{name}")
    if name in _LAZY_NAMES:
        module, attr = _LAZY_NAMES[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'lezero' has no attribute {name!r}")
