"""``lezero.nn``: Module, containers, layers and initialisers with PyTorch's names."""
from lezero.core import Parameter
from lezero.nn import init
from lezero.nn.containers import (ModuleDict, ModuleList, ParameterDict, ParameterList,
                                  Sequential)
from lezero.nn.layers import *          # noqa: F401,F403  (every layer, by torch.nn's names)
from lezero.nn.layers import __all__ as _layers
from lezero.nn.module import Module
from lezero.nn import utils             # noqa: E402  (after the layers it may use)

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict", "init", "utils"] + list(_layers)

# Subpackages with their own import cost load on first use, so ``from lezero import nn``
# stays fast and ``nn.models.get_model(...)`` works without ``import lezero.nn.models``.
_LAZY_SUBMODULES = ("models", "functional")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module(f"lezero.nn.{name}")
    raise AttributeError(f"module 'lezero.nn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))
