"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict.

They behave as torch.nn's: integer and slice indexing with negative indices, ``insert``,
``append``, ``extend``, ``pop`` and ``del`` (list-like containers renumber their entries
``0, 1, ...`` afterwards, so ``state_dict`` keys stay dense), ``len``, ``in`` and
iteration in order, and the same errors (IndexError, KeyError, TypeError).
"""
import operator
from collections import OrderedDict

from lezero.core import Parameter
from lezero.nn.module import Module


def _position(owner, idx, n, insert=False):
    """``idx`` as a position in [0, n) (or [0, n] when inserting), as Python lists count."""
    try:
        idx = operator.index(idx)
    except TypeError:
        raise TypeError(f"{owner}: indices must be integers or slices, got "
                        f"{type(idx).__name__}") from None
    if insert:
        return min(max(idx + n if idx < 0 else idx, 0), n)
    if not -n <= idx < n:
        raise IndexError(f"{owner}: index {idx} is out of range for {n} entries")
    return idx % n


class _ListContainer(Module):
    """A numbered list over one registration table (``_table``): the shared mechanics of
    Sequential, ModuleList and ParameterList.  Entries are keyed "0", "1", ... in order."""

    _table = "_modules"

    def _entries(self):
        return getattr(self, self._table)

    def _check(self, value):
        """Raise TypeError unless ``value`` may be stored; overridden per container."""

    def _store(self, key, value):
        self._check(value)
        self.add_module(key, value)

    def _renumber(self, values):
        self._entries().clear()
        for i, value in enumerate(values):
            self._store(str(i), value)

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(list(self._entries().values()))

    def __getitem__(self, idx):
        values = list(self._entries().values())
        if isinstance(idx, slice):
            return type(self)(values[idx])
        return values[_position(type(self).__name__, idx, len(values))]

    def __setitem__(self, idx, value):
        self._store(str(_position(type(self).__name__, idx, len(self))), value)

    def __delitem__(self, idx):
        values = list(self._entries().values())
        if isinstance(idx, slice):
            del values[idx]
        else:
            del values[_position(type(self).__name__, idx, len(values))]
        self._renumber(values)

    def append(self, value):
        """Add ``value`` at the end; returns self."""
        self._store(str(len(self)), value)
        return self

    def extend(self, values):
        """Append every entry of an iterable; returns self."""
        for value in list(values):
            self.append(value)
        return self

    def insert(self, index, value):
        """Insert ``value`` before position ``index`` (negative counts from the end)."""
        self._check(value)
        values = list(self._entries().values())
        values.insert(_position(type(self).__name__, index, len(values), insert=True), value)
        self._renumber(values)

    def pop(self, index=-1):
        """Remove and return the entry at ``index`` (default: the last)."""
        value = self[index]
        del self[index]
        return value

    def __iadd__(self, other):
        return self.extend(other)

    def __add__(self, other):
        return type(self)(list(self) + list(other))


class Sequential(_ListContainer):
    """Modules applied one after another: ``Sequential(a, b)(x) == b(a(x))``.

    Also accepts one ``OrderedDict`` of named modules (their names are kept, as torch
    keeps them; ``insert``, ``pop`` and ``del`` then renumber the entries).
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self._store(name, m)
        elif len(modules) == 1 and isinstance(modules[0], list):
            self.extend(modules[0])            # what slicing and ``+`` build from
        else:
            self.extend(modules)

    def _check(self, value):
        if not isinstance(value, Module):
            raise TypeError(f"Sequential: entries must be Modules, got {type(value).__name__}")

    def __getitem__(self, idx):
        if isinstance(idx, slice):             # a slice keeps the entries' names
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_ListContainer):
    """A list of modules whose parameters are registered (``ModuleList([...])``)."""

    def __init__(self, modules=None):
        super().__init__()
        self.extend(modules or ())

    def _check(self, value):
        if not isinstance(value, Module):
            raise TypeError(f"ModuleList: entries must be Modules, got {type(value).__name__}")


class ParameterList(_ListContainer):
    """A list of Parameters registered as ``0``, ``1``, ..."""

    _table = "_parameters"

    def __init__(self, values=None):
        super().__init__()
        self.extend(values or ())

    def _check(self, value):
        if not isinstance(value, Parameter):
            raise TypeError(f"ParameterList: entries must be Parameters, got "
                            f"{type(value).__name__}")

    def _store(self, key, value):
        self._check(value)
        self.register_parameter(key, value)

    def extra_repr(self):
        return _parameter_lines(self._parameters)


class _DictContainer(Module):
    """Mapping methods over one registration table (``_table``), in insertion order."""

    _table = "_modules"

    def _entries(self):
        return getattr(self, self._table)

    def __getitem__(self, key):
        return self._entries()[key]

    def __delitem__(self, key):
        del self._entries()[key]

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(list(self._entries()))

    def __contains__(self, key):
        return key in self._entries()

    def keys(self):
        return self._entries().keys()

    def values(self):
        return self._entries().values()

    def items(self):
        return self._entries().items()

    def get(self, key, default=None):
        return self._entries().get(key, default)

    def pop(self, key):
        """Remove ``key`` and return its entry (KeyError when absent)."""
        value = self._entries()[key]
        del self._entries()[key]
        return value

    def clear(self):
        self._entries().clear()

    def update(self, entries):
        """Set every (key, entry) of a mapping or an iterable of pairs, in order."""
        items = entries.items() if hasattr(entries, "items") else entries
        for key, value in items:
            self[key] = value


class ModuleDict(_DictContainer):
    """A dict of modules whose parameters are registered, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        if not isinstance(key, str):
            raise TypeError(f"ModuleDict: keys must be strings, got {type(key).__name__}")
        self.add_module(key, module)


class ParameterDict(_DictContainer):
    """A dict of Parameters.  As in torch, a plain dict given to the constructor or to
    ``update`` is added in sorted key order; an OrderedDict keeps its order."""

    _table = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def update(self, entries):
        if hasattr(entries, "items") and not isinstance(entries, (OrderedDict,
                                                                  ParameterDict)):
            entries = sorted(entries.items())
        super().update(entries)

    def __setitem__(self, key, p):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        self.register_parameter(key, p)

    def extra_repr(self):
        return _parameter_lines(self._parameters)


def _parameter_lines(parameters):
    """torch's listing of a parameter container: one line per entry, inside the parens."""
    lines = []
    for key, p in parameters.items():
        size = "x".join(map(str, p.shape))
        lines.append(f"  ({key}): Parameter containing: [{p.dtype} of size {size}]")
    return "\n".join(lines)
