"""A Function instance's attributes: copied when it is called, compared, re-bound.

A Function keeps its non-array arguments (an axis, a geometry, a mask) as attributes set
in ``__init__``.  The tracer copies them in ``forward_preprocess``, before ``forward``
adds its saved state (``mean``, ``indices`` ...), so what is kept is exactly what a fresh
instance needs.  Graph links (``inputs``, ``outputs``, ``generation``) are left out.
Which classes a saved graph may name is ``lezero.jit.allow``'s business.
"""
import numpy as np

from lezero import cuda
from lezero.jit.ir import ValueRef, _is_lezero_object, _object_state

__all__ = ["GRAPH_KEYS", "snapshot", "bind_values", "attrs_equal", "instantiate"]

GRAPH_KEYS = frozenset({"inputs", "outputs", "generation", "needs_input_grad", "output_meta",
                        "_jit_out_meta", "forward"})
_CONTAINERS = (dict, list, set)


def snapshot(function):
    """The constructor attributes of ``function`` (containers copied one level deep, so
    what ``forward`` later puts in a cache dict is not kept)."""
    out = {}
    for key, value in vars(function).items():
        if key in GRAPH_KEYS:
            continue
        out[key] = type(value)(value) if type(value) in _CONTAINERS else value
    return out


def bind_values(value, arrays, depth=0):
    """``value`` with every array that *is* a graph value's array (by identity, as
    ``{id(array): name}`` in ``arrays``) replaced by a ``ValueRef``."""
    if isinstance(value, cuda.array_types()):
        name = arrays.get(id(value))
        return ValueRef(name) if name is not None else value
    if depth > 5:
        return value
    if isinstance(value, tuple):
        return tuple(bind_values(v, arrays, depth + 1) for v in value)
    if isinstance(value, list):
        return [bind_values(v, arrays, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: bind_values(v, arrays, depth + 1) for k, v in value.items()}
    if _is_lezero_object(value):
        state = _object_state(value)
        bound = {k: bind_values(v, arrays, depth + 1) for k, v in state.items()}
        if any(bound[k] is not state[k] for k in state):
            new = object.__new__(type(value))
            for k, v in bound.items():
                object.__setattr__(new, k, v)
            return new
    return value


def attrs_equal(a, b, depth=0):
    """Deep equality of attribute values (arrays by value, objects by their state)."""
    if isinstance(a, cuda.array_types()) or isinstance(b, cuda.array_types()):
        if not (isinstance(a, cuda.array_types()) and isinstance(b, cuda.array_types())):
            return False
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            (cuda.as_numpy(a) == cuda.as_numpy(b)).all() if a.dtype.kind != "f"
            else np.array_equal(cuda.as_numpy(a), cuda.as_numpy(b), equal_nan=True))
    if type(a) is not type(b):
        return False
    if depth > 6:
        return True
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(attrs_equal(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(attrs_equal(a[k], b[k], depth + 1) for k in a)
    if _is_lezero_object(a):
        sa, sb = _object_state(a), _object_state(b)
        return sa.keys() == sb.keys() and all(attrs_equal(sa[k], sb[k], depth + 1)
                                              for k in sa)
    if isinstance(a, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:      # objects that compare oddly: equal only when identical
        return a is b


def instantiate(cls, attrs, container_keys=()):
    """A fresh Function of class ``cls`` holding ``attrs`` (containers copied so one call
    cannot leak state into the next)."""
    f = cls.__new__(cls)
    f.__dict__.update(attrs)
    for key in container_keys:
        f.__dict__[key] = type(attrs[key])(attrs[key])
    return f
