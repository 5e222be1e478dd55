"""The ``numpy`` backend: host memory, NumPy's namespace, the Numba kernels as its table.

``KERNELS`` names, for each hot operator, the dispatcher in ``lezero.kernels`` that
operators call today (the Numba kernel where ``kernels.enabled`` says so, the NumPy
reference otherwise).  Entries are ``"module:function"`` strings, imported on first use,
so that ``import lezero`` imports no kernel module (and never Numba).
"""
import importlib
from collections.abc import Mapping

import numpy as np

from lezero.backends.base import Backend, Capabilities
from lezero.backends.registry import get_backend

__all__ = ["NumpyBackend", "KERNELS", "LazyKernels"]

KERNELS = {
    "scatter_add": "lezero.kernels.scatter:scatter_add_",
    "scatter_add_rows": "lezero.kernels.scatter:scatter_add_rows_",
    "gelu": "lezero.kernels.gelu:gelu",
    "gelu_grad": "lezero.kernels.gelu:gelu_grad",
    "relu": "lezero.kernels.relu:relu",
    "relu_grad": "lezero.kernels.relu:relu_grad",
    "layer_norm": "lezero.kernels.layernorm:layer_norm",
    "layer_norm_grad": "lezero.kernels.layernorm:layer_norm_grad",
    "masked_softmax": "lezero.kernels.softmax:masked_softmax",
    "softmax_grad": "lezero.kernels.softmax:softmax_grad",
    "softmax_stats": "lezero.kernels.softmax:softmax_stats",
    "attention_forward": "lezero.kernels.attention:attention_forward",
    "attention_backward": "lezero.kernels.attention:attention_backward",
    "lstm_cell": "lezero.kernels.lstm:lstm_cell",
    "lstm_cell_grad": "lezero.kernels.lstm:lstm_cell_grad",
    "max_pool": "lezero.kernels.pooling:max_pool",
    "adam_step": "lezero.kernels.adam:adam_step_",
    "axpby": "lezero.kernels.axpy:axpby_",
    "add_bias": "lezero.kernels.bias:add_bias_",
    "bias_grad": "lezero.kernels.bias:bias_grad",
    "adjacent_join": "lezero.kernels.join:adjacent_join",
    "segment_max_rows": "lezero.kernels.host:segment_max_rows",
    "stable_argsort": "lezero.kernels.host:stable_argsort",
    "scratch": "lezero.runtime.scratch:pooled_scratch",
}


class LazyKernels(Mapping):
    """An op-name -> function table whose entries are imported when first looked up."""

    def __init__(self, paths):
        self._paths = dict(paths)
        self._loaded = {}

    def __getitem__(self, name):
        if name not in self._loaded:
            module, attr = self._paths[name].split(":")
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def __iter__(self):
        return iter(self._paths)

    def __len__(self):
        return len(self._paths)


class NumpyBackend(Backend):
    """The host: NumPy arrays, float16 emulated through float32 by NumPy's loops."""

    rng_methods = frozenset(name for name in dir(np.random.Generator)
                            if not name.startswith("_"))
    is_host = True

    def __init__(self):
        super().__init__("numpy", np, (np.ndarray,),
                         Capabilities(float16=False))
        self.kernels = LazyKernels(KERNELS)

    def from_host(self, array, device=None):
        return np.asarray(array)

    def to_host(self, array):
        return np.asarray(array)

    def asarray(self, value, dtype=None, copy=False):
        source = type(value) is not np.ndarray and get_backend(value)
        if source and not source.is_host:
            value = source.to_host(value)
        return np.array(value, dtype=dtype, copy=True) if copy else np.asarray(value, dtype)

    def device_of(self, array):
        return "cpu"

    def scatter_add(self, target, index, values):
        return self.kernels["scatter_add"](target, index, values)

    def rng(self, seed=None):
        return np.random.default_rng(seed)

    @property
    def special(self):
        import scipy.special
        return scipy.special
