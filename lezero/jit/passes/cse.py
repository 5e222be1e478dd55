"""Common-subexpression elimination: two nodes with the same operator, the same inputs
and equal attributes compute the same values, so the second is dropped and its readers
use the first.  Constants with equal contents are merged first (so that ``x * 2`` twice,
each 2 wrapped separately, is recognised).  Dropout nodes are never merged: each draws
its own mask."""
import numpy as np

from lezero import cuda
from lezero.jit.ir import ValueRef, _is_lezero_object, _object_state, resolve_refs
from lezero.jit.passes.dce import dce, is_stochastic

__all__ = ["cse", "attr_key"]

_MAX_HASHED = 1 << 16      # arrays up to this many bytes are compared by content


def _array_key(a):
    if a.nbytes <= _MAX_HASHED:
        return ("array", a.shape, a.dtype.str, cuda.as_numpy(a).tobytes())
    return ("array-id", id(a))


def attr_key(value, depth=0):
    """A hashable key equal for equal attribute values."""
    if isinstance(value, cuda.array_types()):
        return _array_key(value)
    if isinstance(value, ValueRef):
        return ("ref", value.name)
    if depth > 6:
        return ("id", id(value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(attr_key(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((repr(k), attr_key(v, depth + 1))
                                        for k, v in value.items()))
    if _is_lezero_object(value):
        state = _object_state(value)
        return (type(value).__name__,) + tuple(
            sorted((k, attr_key(v, depth + 1)) for k, v in state.items()))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    try:
        hash(value)
        return (type(value).__name__, value)
    except TypeError:
        return ("id", id(value))


def _merge_constants(g, rename):
    seen = {}
    for name, arr in g.consts.items():
        if arr.nbytes > _MAX_HASHED:
            continue
        key = _array_key(np.asarray(cuda.as_numpy(arr)))
        if key in seen:
            rename[name] = seen[key]
        else:
            seen[key] = name


def cse(graph):
    """A copy of ``graph`` where repeated computations are computed once."""
    g = graph.copy()
    rename = {}
    _merge_constants(g, rename)
    table, kept, merged = {}, [], 0

    def r(name):
        return rename.get(name, name)

    for node in g.nodes:
        node.inputs = [r(n) for n in node.inputs]
        node.attrs = {k: resolve_refs(v, lambda n: ValueRef(r(n)))
                      for k, v in node.attrs.items()}
        if is_stochastic(node) or node.sub is not None:
            kept.append(node)
            continue
        key = (node.op, tuple(node.inputs), len(node.outputs),
               tuple(sorted((k, attr_key(v)) for k, v in node.attrs.items())))
        first = table.get(key)
        if first is None:
            table[key] = node
            kept.append(node)
        else:
            for a, b in zip(node.outputs, first.outputs):
                rename[a] = b
            merged += 1
    g.nodes = kept
    g.outputs = [r(n) for n in g.outputs]
    g.meta["cse_merged"] = g.meta.get("cse_merged", 0) + merged
    return dce(g)
