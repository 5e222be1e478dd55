"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from collections import OrderedDict

from lezero.core import Parameter
from lezero.nn.module import Module


def _index(op, idx, n):
    if not isinstance(idx, int):
        raise TypeError(f"{op}: index must be an int or slice, got {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"{op}: index {idx} is out of range for {n} modules")
    return idx % n


class _ListMixin:
    """Sequence methods over one registration table (``_table`` names it)."""

    _table = "_modules"

    def __len__(self):
        return len(getattr(self, self._table))

    def __iter__(self):
        return iter(getattr(self, self._table).values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class Sequential(_ListMixin, Module):
    """Modules applied one after another: ``Sequential(a, b)(x) == b(a(x))``.

    Also accepts one ``OrderedDict`` of named modules.
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index("Sequential", idx, len(self))]


class ModuleList(_ListMixin, Module):
    """A list of modules whose parameters are registered (``ModuleList([...])``)."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index("ModuleList", idx, len(self)))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index("ModuleList", idx, len(self))), module)

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self


class _DictMixin:
    """Mapping methods over one registration table (``_table`` names it)."""

    _table = "_modules"

    def __getitem__(self, key):
        return getattr(self, self._table)[key]

    def __delitem__(self, key):
        del getattr(self, self._table)[key]

    def __len__(self):
        return len(getattr(self, self._table))

    def __iter__(self):
        return iter(getattr(self, self._table))

    def __contains__(self, key):
        return key in getattr(self, self._table)

    def keys(self):
        return getattr(self, self._table).keys()

    def values(self):
        return getattr(self, self._table).values()

    def items(self):
        return getattr(self, self._table).items()


class ModuleDict(_DictMixin, Module):
    """A dict of modules whose parameters are registered, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        for name, m in dict(modules or {}).items():
            self[name] = m

    def __setitem__(self, key, module):
        self.add_module(key, module)


class ParameterList(_ListMixin, Module):
    """A list of Parameters registered as ``0``, ``1``, ..."""

    _table = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        for p in parameters or ():
            self.append(p)

    def append(self, p):
        if not isinstance(p, Parameter):
            raise TypeError(f"ParameterList: expected a Parameter, got {type(p).__name__}")
        self.register_parameter(str(len(self._parameters)), p)
        return self

    def __getitem__(self, idx):
        return self._parameters[str(_index("ParameterList", idx, len(self)))]


class ParameterDict(_DictMixin, Module):
    """A dict of Parameters, in insertion order."""

    _table = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        for k, p in dict(parameters or {}).items():
            self[k] = p

    def __setitem__(self, key, p):
        self.register_parameter(key, p)
