"""``lezero.nn``: Module, containers, layers and initialisers with PyTorch's names."""
from lezero.core import Parameter
from lezero.nn import init
from lezero.nn.containers import (ModuleDict, ModuleList, ParameterDict, ParameterList,
                                  Sequential)
from lezero.nn.module import Module

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict", "init"]
