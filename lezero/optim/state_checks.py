"""The checks behind ``Optimizer.load_state_dict``: a state dict is data, often read from a
file someone else wrote, so every entry is checked before anything is assigned.

An update rule trusts its state: Adam's kernel walks the whole parameter over
``exp_avg``, so a (1, 300) buffer for a (300, 300) weight read and wrote memory it did not
own.  Here each optimizer names the state it reads (``Optimizer.state_spec``, key -> one of
the kinds below, and ``required_state``); a loaded entry of a named key must have that kind
(a buffer: exactly the parameter's shape and a numeric dtype), the groups must match ours
in count and size, every index must be a distinct parameter, and the options must pass the
same checks as the constructor's.  Errors are ``ValueError`` (``TypeError`` for a wrong
kind) starting ``<Optimizer>.load_state_dict:`` and naming the group, the parameter (its
name when known), the key and both shapes.  Keys no rule reads are kept as they are
(PyTorch does the same), arrays copied.
"""
import math
import numbers

import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Variable
from lezero.utils.checks import describe, is_int

__all__ = ["PARAM", "PARAM_OR_NONE", "COUNT", "FRACTION", "REAL", "FLAT", "FLAT_LIST",
           "REAL_LIST", "check_state_dict"]

PARAM = "an array of the parameter's shape"
PARAM_OR_NONE = "an array of the parameter's shape, or None"
COUNT = "a non-negative integer"
FRACTION = "a number in [0, 1]"
REAL = "a real number"
FLAT = "a 1-D array of all parameters' total size"
FLAT_LIST = "a list of 1-D arrays of all parameters' total size"
REAL_LIST = "a list of real numbers"


class _Where:
    """Where a state entry belongs, for messages and for the arrays' shape and dtype."""

    def __init__(self, name, param, group, position, index, pname, flat):
        self.name, self.param, self.flat = name, param, flat
        label = f" ({pname!r})" if pname is not None else ""
        self.text = f"param group {group}, parameter {position}{label} (index {index})"

    def fail(self, key, message, error=ValueError):
        raise error(f"{self.name}: {self.text}: state {key!r} {message}")


def check_state_dict(opt, state_dict):
    """``(state, groups)`` ready to assign to ``opt``, from a checked ``state_dict``."""
    name = f"{type(opt).__name__}.load_state_dict"
    if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
        raise ValueError(f"{name}: expected a dict with 'state' and 'param_groups', got "
                         f"{type(state_dict).__name__}")
    saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
    if not isinstance(saved_groups, (list, tuple)):
        raise TypeError(f"{name}: 'param_groups' must be a list, got "
                        f"{type(saved_groups).__name__}")
    if not isinstance(saved_state, dict):
        raise TypeError(f"{name}: 'state' must be a dict, got {type(saved_state).__name__}")
    if len(saved_groups) != len(opt.param_groups):
        raise ValueError(f"{name}: the state dict has {len(saved_groups)} parameter groups, "
                         f"this optimizer has {len(opt.param_groups)}")
    located = _locate(name, saved_groups, opt.param_groups)
    groups = [_merged_group(opt, name, saved, group, i)
              for i, (saved, group) in enumerate(zip(saved_groups, opt.param_groups))]
    state = {}
    for key, entry in saved_state.items():
        where = located.get(_index(name, "a state key", key))
        if where is None:
            raise ValueError(f"{name}: state for parameter {key!r} has no matching parameter "
                             "in the param groups")
        if not isinstance(entry, dict):
            raise TypeError(f"{name}: {where.text}: its state must be a dict, got "
                            f"{type(entry).__name__}")
        state[where.param] = _param_state(opt, where, entry)
    return state, groups


def _index(name, what, value):
    """A parameter index from a state dict: an int, or its decimal string (JSON keys)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if not is_int(value) or value < 0:
        raise ValueError(f"{name}: {what} must be a parameter index (an int >= 0), got "
                         f"{describe(value)}")
    return int(value)


def _locate(name, saved_groups, groups):
    """Each saved index -> a ``_Where`` for our parameter at the same place."""
    flat = sum(int(p.data.size) for g in groups for p in g["params"])
    located = {}
    for i, (saved, group) in enumerate(zip(saved_groups, groups)):
        if not isinstance(saved, dict) or not isinstance(saved.get("params"), (list, tuple)):
            raise ValueError(f"{name}: param group {i} must be a dict with a 'params' list, "
                             f"got {type(saved).__name__}")
        if len(saved["params"]) != len(group["params"]):
            raise ValueError(f"{name}: param group {i} holds {len(saved['params'])} parameters "
                             f"in the state dict but {len(group['params'])} in this optimizer")
        names = group.get("param_names")
        if not isinstance(names, (list, tuple)) or len(names) != len(group["params"]):
            names = [None] * len(group["params"])
        for j, (k, p) in enumerate(zip(saved["params"], group["params"])):
            k = _index(name, f"param group {i} 'params'[{j}]", k)
            if k in located:
                raise ValueError(f"{name}: parameter index {k} appears twice in "
                                 "'param_groups'")
            located[k] = _Where(name, p, i, j, k, names[j], flat)
    return located


def _merged_group(opt, name, saved, group, index):
    """Our group with the saved options (options the saved dict lacks, as in an older or
    a PyTorch state dict, keep their values), checked as ``add_param_group`` checks."""
    new = {k: v for k, v in group.items() if k != "params"}
    new["params"] = group["params"]
    try:
        new.update((k, _copy_option(k, v)) for k, v in saved.items() if k != "params")
        names = new.get("param_names")
        if names is not None and not (isinstance(names, (list, tuple)) and len(names) == len(
                group["params"]) and all(isinstance(n, str) for n in names)):
            raise ValueError(f"param_names must be a list of {len(group['params'])} "
                             f"strings, got {describe(names)}")
        opt._check_kinds(new)
        opt._check_group(new, index)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{name}: param group {index}: {err}") from None
    return new


def _copy_option(key, value, depth=0):
    """A saved option copied (nested at most a few lists deep: options are numbers, pairs
    and short lists, and a deeper one from a file must not exhaust the stack)."""
    if isinstance(value, (list, tuple)):
        if depth > 8:
            raise ValueError(f"option {key!r} is nested more than 8 lists deep")
        items = [_copy_option(key, v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, (np.ndarray, np.generic)) and value.ndim == 0:
        return value.item()      # PyTorch keeps lr as a tensor at times; we keep numbers
    return value


def _param_state(opt, where, entry):
    """One parameter's loaded state: the keys its rule reads checked by kind."""
    spec = opt.state_spec
    if entry:
        missing = [k for k in opt.required_state if k not in entry]
        if missing:
            where.fail(missing[0], f"is missing (a {type(opt).__name__} state needs "
                       f"{', '.join(map(repr, opt.required_state))})")
    return {k: _value(where, k, v, spec[k]) if k in spec else _other(v, where.param.data)
            for k, v in entry.items()}


def _value(where, key, value, kind):
    if kind in (PARAM, PARAM_OR_NONE):
        if value is None and kind == PARAM_OR_NONE:
            return None
        return _array(where, key, value, where.param.data.shape, "the parameter's shape")
    if kind == FLAT:
        return _array(where, key, value, (where.flat,), "all parameters' total size")
    if kind == FLAT_LIST:
        _is_list(where, key, value)
        return [_array(where, f"{key}[{i}]", v, (where.flat,), "all parameters' total size")
                for i, v in enumerate(value)]
    if kind == REAL_LIST:
        _is_list(where, key, value)
        return [_number(where, f"{key}[{i}]", v, REAL) for i, v in enumerate(value)]
    return _number(where, key, value, kind)


def _is_list(where, key, value):
    if not isinstance(value, (list, tuple)):
        where.fail(key, f"must be a list, got {type(value).__name__}", TypeError)


def _number(where, key, value, kind):
    """A scalar entry (a number, or a one-element array as PyTorch stores ``step``)."""
    if isinstance(value, Variable):
        value = value.data
    if isinstance(value, cuda.array_types() + (np.generic,)):
        if value.size != 1 or value.dtype.kind not in "iuf":
            where.fail(key, f"must be {kind}, got an array of shape {value.shape} and dtype "
                       f"{value.dtype}", TypeError)
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        where.fail(key, f"must be {kind}, got {describe(value)}", TypeError)
    value = float(value) if isinstance(value, float) else value
    if kind == COUNT:
        if not (math.isfinite(value) and value >= 0 and float(value).is_integer()):
            where.fail(key, f"must be {kind}, got {value!r}")
        return int(value)
    if kind == FRACTION and not 0.0 <= value <= 1.0:
        where.fail(key, f"must be {kind}, got {value!r}")
    return float(value)


def _array(where, key, value, shape, what):
    """A copy of ``value`` on the parameter's device, in its dtype, checked for ``shape``
    and a numeric dtype (the update kernels walk the parameter over it)."""
    like = where.param.data
    if isinstance(value, Variable):
        value = value.data
    if not isinstance(value, cuda.array_types() + (np.generic,)):
        where.fail(key, f"must be an array, got {describe(value)}", TypeError)
    if value.dtype.kind not in "iuf":
        where.fail(key, f"must hold numbers, got dtype {value.dtype}", TypeError)
    if tuple(value.shape) != tuple(shape):
        where.fail(key, f"has shape {tuple(value.shape)}, expected {tuple(shape)} ({what})")
    return _copy_to(value, like, like.dtype)


def _copy_to(value, like, dtype):
    return get_backend(like).asarray(value, dtype=dtype, copy=True)


def _other(value, like):
    """A key no update rule reads: arrays copied to ``like``'s device (floating ones in
    its dtype), anything else kept."""
    if isinstance(value, Variable):
        value = value.data
    if isinstance(value, cuda.array_types() + (np.generic,)):
        return _copy_to(value, like, like.dtype if value.dtype.kind == "f" else value.dtype)
    return value
