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
