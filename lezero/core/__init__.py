"""The define-by-run core: Variable, Parameter, Function, Config, backward, grad, hooks."""
# variable first: it pulls in the backward engine once Variable exists.
from lezero.core.variable import Parameter, Variable, as_array, as_variable
from lezero.core.backward import backward, grad
from lezero.core.config import (Config, enable_grad, get_config, no_grad, register_setting,
                                test_mode, using_config)
from lezero.core.function import Function
from lezero.core.hooks import FunctionHook, TimerHook
from lezero.core.random import get_rng, get_rng_state, manual_seed, set_rng_state

__all__ = ["Variable", "Parameter", "Function", "Config", "using_config", "no_grad",
           "enable_grad", "test_mode", "get_config", "register_setting", "backward", "grad",
           "FunctionHook", "TimerHook", "manual_seed", "get_rng", "get_rng_state",
           "set_rng_state", "as_array", "as_variable"]
