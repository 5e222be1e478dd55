"""Attribute values of a ``.lzg`` file: tagged JSON -> Python values, bounded and allow-listed.

JSON gives ``None``, booleans, numbers, strings and lists as they are; a JSON object must
be exactly one of these tags (its keys are checked, nothing else is accepted)::

    {"$tuple": [...]}           {"$slice": [start, stop, step]}  (ints or null)
    {"$dict": [[k, v], ...]}    {"$ellipsis": true}
    {"$ref": value name}        {"$array": key in the weights}
    {"$float": "inf" | "-inf" | "nan"}
    {"$dtype": name}            {"$scalar": [dtype name, number]}
    {"$object": class, "module": m, "state": {...}}     (a helper in ``allow.HELPERS``)
    {"$namedtuple": name, "module": m, "fields": {...}} (re-created, never imported)

Nesting is bounded (``MAX_DEPTH``), and a ``$ref`` may sit at most ``REF_DEPTH`` levels
deep (the executor re-binds references down to that depth).  Every problem is a
``GraphFormatError`` saying what is wrong; the caller adds the file and the node.
"""
from lezero.jit import allow
from lezero.jit.errors import GraphFormatError
from lezero.jit.ir import ValueRef

__all__ = ["Decoder", "MAX_DEPTH", "REF_DEPTH"]

MAX_DEPTH = 32
REF_DEPTH = 6
_NONFINITE = ("inf", "-inf", "nan")


def _keys(v, tag, extra=()):
    if set(v) != {tag, *extra}:
        raise GraphFormatError(f"tagged value {tag} has keys {sorted(v)}, expected "
                               f"{sorted({tag, *extra})}")


def _body(v, tag, kind, length=None):
    body = v[tag]
    if not isinstance(body, kind) or (length is not None and len(body) != length):
        raise GraphFormatError(f"{tag} holds {type(body).__name__} {str(body)[:40]!r}, "
                               f"expected a {kind.__name__}"
                               + (f" of {length} items" if length is not None else ""))
    return body


def _hashable_key(k):
    if k is None or isinstance(k, (bool, int, float, str)):
        return True
    return isinstance(k, tuple) and all(_hashable_key(x) for x in k)


class Decoder:
    """Decodes attribute values; ``arrays`` are the weights' tensors (for ``$array``),
    ``used`` collects the keys read."""

    def __init__(self, arrays):
        self.arrays, self.used = arrays, set()

    def decode(self, v, depth=0):
        if depth > MAX_DEPTH:
            raise GraphFormatError(f"an attribute is nested more than {MAX_DEPTH} levels deep")
        if type(v) is int and not -2 ** 63 <= v < 2 ** 64:
            raise GraphFormatError(f"integer {str(v)[:20]}... does not fit 64 bits")
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if isinstance(v, list):
            return [self.decode(x, depth + 1) for x in v]
        if not isinstance(v, dict) or not v:
            raise GraphFormatError(f"attribute value {str(v)[:40]!r} is not valid JSON data")
        tag = next(iter(v))
        handler = _TAGS.get(tag)
        if handler is None:
            raise GraphFormatError(f"unknown attribute tag {str(tag)[:40]!r}")
        return handler(self, v, depth)

    def _items(self, body, depth):
        return [self.decode(x, depth + 1) for x in body]

    def _tuple(self, v, depth):
        _keys(v, "$tuple")
        return tuple(self._items(_body(v, "$tuple", list), depth))

    def _ref(self, v, depth):
        _keys(v, "$ref")
        if depth > REF_DEPTH:
            raise GraphFormatError(f"a value reference sits {depth} levels deep (at most "
                                   f"{REF_DEPTH})")
        return ValueRef(_body(v, "$ref", str))

    def _array(self, v, depth):
        _keys(v, "$array")
        key = _body(v, "$array", str)
        if key not in self.arrays:
            raise GraphFormatError(f"attribute array {key[:80]!r} is missing from the weights")
        self.used.add(key)
        return self.arrays[key]

    def _float(self, v, depth):
        _keys(v, "$float")
        body = v["$float"]
        if body not in _NONFINITE:
            raise GraphFormatError(f"$float holds {str(body)[:40]!r}, expected one of "
                                   f"{_NONFINITE}")
        return float(body)

    def _scalar(self, v, depth):
        _keys(v, "$scalar")
        name, value = _body(v, "$scalar", list, 2)
        dtype = allow.dtype_of(name, "scalar dtype")
        value = self.decode(value, depth + 1)
        if isinstance(value, (list, tuple, dict)) or value is None or isinstance(value, str):
            raise GraphFormatError(f"$scalar holds {type(value).__name__}, expected a number")
        try:
            return dtype.type(value)
        except (OverflowError, ValueError, TypeError) as e:
            raise GraphFormatError(f"$scalar {value!r} does not fit {name}: {e}") from None

    def _dtype(self, v, depth):
        _keys(v, "$dtype")
        return allow.dtype_of(v["$dtype"])

    def _dict(self, v, depth):
        _keys(v, "$dict")
        out = {}
        for pair in _body(v, "$dict", list):
            if not isinstance(pair, list) or len(pair) != 2:
                raise GraphFormatError("$dict entries must be [key, value] pairs")
            key = self.decode(pair[0], depth + 1)
            if not _hashable_key(key):
                raise GraphFormatError(f"$dict key {str(key)[:40]!r} is not a number, string "
                                       "or tuple of them")
            out[key] = self.decode(pair[1], depth + 1)
        return out

    def _slice(self, v, depth):
        _keys(v, "$slice")
        parts = self._items(_body(v, "$slice", list, 3), depth)
        if not all(p is None or type(p) is int for p in parts):
            raise GraphFormatError(f"$slice bounds must be ints or null, got {parts}")
        return slice(*parts)

    def _ellipsis(self, v, depth):
        _keys(v, "$ellipsis")
        if v["$ellipsis"] is not True:
            raise GraphFormatError("$ellipsis must hold true")
        return Ellipsis

    def _object(self, v, depth):
        _keys(v, "$object", ("module", "state"))
        cls = allow.helper_class(v["$object"], v["module"])
        state = v["state"]
        if not isinstance(state, dict):
            raise GraphFormatError(f"$object {v['$object']!r} has no state object")
        return allow.build_helper(cls, {k: self.decode(x, depth + 1)
                                        for k, x in state.items()})

    def _namedtuple(self, v, depth):
        _keys(v, "$namedtuple", ("module", "fields"))
        fields = v["fields"]
        if not isinstance(fields, dict):
            raise GraphFormatError(f"$namedtuple {str(v['$namedtuple'])[:40]!r} has no "
                                   "fields object")
        cls = allow.namedtuple_type(v["$namedtuple"], list(fields))
        return cls(*[self.decode(x, depth + 1) for x in fields.values()])


_TAGS = {"$tuple": Decoder._tuple, "$ref": Decoder._ref, "$array": Decoder._array,
         "$float": Decoder._float, "$scalar": Decoder._scalar, "$dtype": Decoder._dtype,
         "$dict": Decoder._dict, "$slice": Decoder._slice, "$ellipsis": Decoder._ellipsis,
         "$object": Decoder._object, "$namedtuple": Decoder._namedtuple}
