"""What a ``.lzg`` file may name: LeZero's own operators, two helper types, numeric dtypes.

A saved graph is data.  Nothing in it is imported or called by name except through the
tables below, so a crafted file cannot reach ``subprocess.Popen`` or any other class:

* an operator (``node["op"]``) is a ``Function`` subclass defined in ``lezero.functions``,
  ``lezero.quantization`` or ``lezero.amp``, found by its class name;
* a ``{"$object": ...}`` attribute is one of ``HELPERS`` (a convolution or pooling
  geometry), rebuilt by calling its constructor with the stored fields, then checked
  (every size positive, every window inside the padded input);
* a ``{"$namedtuple": ...}`` is re-created from its field names with
  ``collections.namedtuple``; the module it names is never imported;
* a dtype is one of ``DTYPES`` (plain numbers and booleans).

Anything else raises ``GraphFormatError`` naming the offending name.
"""
import collections
import keyword
import re

import numpy as np

from lezero.jit.errors import GraphFormatError

__all__ = ["function_class", "helper_class", "build_helper", "namedtuple_type", "dtype_of",
           "helper_key", "DTYPES", "FUNCTION_PACKAGES"]

FUNCTION_PACKAGES = ("lezero.functions.", "lezero.quantization.", "lezero.amp.")
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64", "complex64", "complex128",
                    "bfloat16", "float8_e4m3fn", "float8_e5m2"})
_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}\Z")
_TYPENAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
_functions = {}


def _lezero_functions():
    """{class name: class} of the Functions a file may name (LeZero's own only)."""
    import lezero.functions  # noqa: F401  (loads every operator)
    from lezero.core import Function
    table, stack = {}, [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if (sub.__module__.startswith(FUNCTION_PACKAGES) and sub.forward is not
                    Function.forward and sub.__name__ not in table):
                table[sub.__name__] = sub
    return table


def function_class(name):
    """The LeZero ``Function`` subclass called ``name``, or None (a user's Function, or a
    class outside the operator packages, is never returned)."""
    if not isinstance(name, str):
        return None
    cls = _functions.get(name)
    if cls is None:                      # a module imported since: look again, once
        _functions.update(_lezero_functions())
        cls = _functions.get(name)
    return cls


def _ints(value, low):
    return (isinstance(value, tuple) and all(type(v) is int and v >= low for v in value))


def _check_conv(g):
    """A convolution geometry whose every output window lies in the padded input."""
    fields = (g.in_size, g.out_size, g.kernel, g.stride, g.pad_lo, g.pad_hi, g.dilation)
    nd = len(g.kernel) if isinstance(g.kernel, tuple) else 0
    if not (1 <= nd <= 3 and all(_ints(f, 0) and len(f) == nd for f in fields)
            and type(g.groups) is int and g.groups >= 1):
        return "its fields must be tuples of one non-negative int per spatial dim (1 to 3)"
    for i, o, k, s, lo, hi, d in zip(*fields):
        if min(i, o, k, s, d) < 1 or (o - 1) * s + d * (k - 1) + 1 > i + lo + hi:
            return (f"output size {g.out_size} does not fit input size {g.in_size} with "
                    f"kernel {g.kernel}, stride {g.stride}, padding {g.pad_lo}/{g.pad_hi} "
                    f"and dilation {g.dilation}")
    return None


def _check_pool(g):
    """A pooling geometry whose every window starts inside the (left-padded) input."""
    fields = (g.kernel, g.stride, g.padding, g.dilation, g.in_size, g.out_size)
    nd = len(g.kernel) if isinstance(g.kernel, tuple) else 0
    if not (2 <= nd <= 3 and all(_ints(f, 0) and len(f) == nd for f in fields)):
        return "its fields must be tuples of one non-negative int per spatial dim (2 or 3)"
    for k, s, p, d, i, o in zip(*fields):
        if min(k, s, d, i, o) < 1 or p > k // 2 or (o - 1) * s >= i + p:
            return (f"output size {g.out_size} does not fit input size {g.in_size} with "
                    f"kernel {g.kernel}, stride {g.stride}, padding {g.padding} and "
                    f"dilation {g.dilation}")
    return None


def _conv_geometry():
    from lezero.functions.conv.geometry import ConvGeometry
    return ConvGeometry


def _pool_geometry():
    from lezero.functions.pooling.common import Geom
    return Geom


# (module, class name) -> (class loader, checker returning a complaint or None)
HELPERS = {
    ("lezero.functions.conv.geometry", "ConvGeometry"): (_conv_geometry, _check_conv),
    ("lezero.functions.pooling.common", "Geom"): (_pool_geometry, _check_pool),
}


def helper_key(obj):
    """``(module, name)`` of ``obj``'s class when it is a helper a file may hold."""
    key = (type(obj).__module__, type(obj).__name__)
    return key if key in HELPERS else None


def helper_class(name, module):
    """The helper class for a stored ``$object`` (by module and name, or by name alone
    when exactly one helper has it: the class may have moved), or GraphFormatError."""
    entry = HELPERS.get((module, name))
    if entry is None:
        matches = [e for (_, n), e in HELPERS.items() if n == name]
        entry = matches[0] if len(matches) == 1 else None
    if entry is None:
        raise GraphFormatError(f"attribute object {module!r}.{name!r} is not one of the "
                               f"classes a graph may hold "
                               f"({', '.join(n for _, n in HELPERS)})")
    return entry[0]()


def build_helper(cls, state):
    """``cls(**state)`` (the constructor checks the field names), then the class's own
    consistency check."""
    key = (cls.__module__, cls.__name__)
    try:
        obj = cls(**state)
    except TypeError as e:
        raise GraphFormatError(f"attribute object {cls.__name__} has fields "
                               f"{sorted(state)} that its class does not take ({e})") from None
    problem = HELPERS[key][1](obj)
    if problem:
        raise GraphFormatError(f"attribute object {cls.__name__} is inconsistent: {problem}")
    return obj


def _identifier(text, what, pattern=_FIELD):
    if not (isinstance(text, str) and pattern.match(text) and not keyword.iskeyword(text)):
        raise GraphFormatError(f"{what} {text!r} is not a valid identifier")
    return text


def namedtuple_type(name, fields):
    """A plain namedtuple class with these field names (never an imported class)."""
    _identifier(name, "namedtuple name", _TYPENAME)
    if not isinstance(fields, (list, tuple)) or len(fields) > 256:
        raise GraphFormatError(f"namedtuple {name!r} has malformed fields")
    names = [_identifier(f, f"namedtuple {name!r} field") for f in fields]
    if len(set(names)) != len(names):
        raise GraphFormatError(f"namedtuple {name!r} repeats a field name")
    return collections.namedtuple(name, names)


def dtype_of(name, what="dtype"):
    """The NumPy dtype ``name`` when it is one of ``DTYPES``, else GraphFormatError."""
    if not isinstance(name, str) or name not in DTYPES:
        raise GraphFormatError(f"{what} {name!r} is not one of the dtypes a graph may hold "
                               "(booleans, integers, floats, complex)")
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:                                 # bfloat16 and float8 come from ml_dtypes
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError):
        raise GraphFormatError(f"{what} {name!r} needs the ml_dtypes package") from None
