"""The define-by-run core: Variable, Parameter, Function, Config, backward, grad, hooks.

The engine only: operators live in ``lezero.functions``, the process generator in
``lezero.random``, profilers and allocator settings in ``lezero.utils``.
"""
# variable first: it pulls in the backward engine once Variable exists.
from lezero.core.variable import Parameter, Variable, as_variable
from lezero.cuda import as_array
from lezero.core.backward import backward, count_leaf_uses, grad
from lezero.core.config import (Config, enable_grad, get_config, no_grad, pop_setting,
                                push_setting, register_setting, test_mode, using_config)
from lezero.core.function import Function
from lezero.core.inputref import InputRef
from lezero.core.hooks import FunctionHook

__all__ = ["Variable", "Parameter", "Function", "Config", "using_config", "no_grad",
           "enable_grad", "test_mode", "get_config", "register_setting", "push_setting",
           "pop_setting", "backward", "grad", "count_leaf_uses", "FunctionHook", "InputRef",
           "as_array", "as_variable"]
