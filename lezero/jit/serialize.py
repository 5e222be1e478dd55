"""The ``.lzg`` file: a StaticGraph that loads without the code that traced it.

A ``.lzg`` file is a zip archive with two members:

``graph.json``
    ``{"format": "lezero-graph", "version": 1, "inputs": [...], "outputs": [...],
    "values": {name: {"kind", "shape", "dtype"}}, "params": [...], "consts": [...],
    "nodes": [{"op", "inputs", "outputs", "attrs", "sub"}], "out_tree", "signature",
    "mode", "meta"}``.  ``op`` is a Function class name, found again at load time among
    LeZero's Functions (not by module path).  Attribute values are JSON with tagged
    objects: ``{"$tuple": [...]}``, ``{"$slice": [a, b, c]}``, ``{"$array": key}`` (an
    array stored in the weights), ``{"$ref": value}`` (an attribute bound to a graph
    value), ``{"$dtype": "float32"}``, ``{"$scalar": [dtype, value]}``, ``{"$float":
    "inf"}``, ``{"$object": class, "module": hint, "state": {...}}`` (a LeZero helper
    object such as a convolution geometry), ``{"$namedtuple": ...}``, ``{"$dict": [[k,
    v], ...]}`` and ``{"$ellipsis": true}``.
``weights.safetensors``
    parameters (by their names), constants (by their value names) and attribute arrays
    (``attr.<node>.<name>.<k>``), in the safetensors format.

The file is written with ``atomic_write``; loading checks the archive, the JSON, the
format version, every operator and every tensor, and a corrupt or truncated file raises
``GraphFormatError`` saying which part is wrong.
"""
import io
import json
import math
import zipfile

import numpy as np

from lezero import cuda
from lezero.core import Parameter
from lezero.jit import attrs as A
from lezero.jit.errors import GraphFormatError
from lezero.jit.ir import Graph, Node, Value, ValueRef, _is_lezero_object, _object_state
from lezero.utils import safetensors
from lezero.utils.files import atomic_write

__all__ = ["save_graph", "load_graph", "FORMAT", "VERSION"]

FORMAT, VERSION = "lezero-graph", 1
_RUNTIME_ONLY = ("_kernel",)


class _Encoder:
    """Attribute values -> JSON, arrays collected for the weights file."""

    def __init__(self):
        self.arrays = {}

    def encode(self, v, where):
        if v is None or isinstance(v, (bool, str)) or type(v) is int:
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, ValueRef):
            return {"$ref": v.name}
        if isinstance(v, cuda.array_types()):
            key = f"attr.{where}.{len(self.arrays)}"
            self.arrays[key] = cuda.as_numpy(v)
            return {"$array": key}
        if isinstance(v, np.generic):
            return {"$scalar": [v.dtype.name, self.encode(v.item(), where)]}
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            return {"$dtype": np.dtype(v).name}
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return {"$namedtuple": type(v).__name__, "module": type(v).__module__,
                    "fields": {f: self.encode(getattr(v, f), where) for f in v._fields}}
        if isinstance(v, tuple):
            return {"$tuple": [self.encode(x, where) for x in v]}
        if isinstance(v, list):
            return [self.encode(x, where) for x in v]
        if isinstance(v, dict):
            return {"$dict": [[self.encode(k, where), self.encode(x, where)]
                              for k, x in v.items()]}
        if isinstance(v, slice):
            return {"$slice": [self.encode(x, where) for x in (v.start, v.stop, v.step)]}
        if v is Ellipsis:
            return {"$ellipsis": True}
        if isinstance(v, (int, float, complex)) and not isinstance(v, bool):
            return self.encode(type(v).__mro__[-2](v), where)
        if _is_lezero_object(v):
            return {"$object": type(v).__name__, "module": type(v).__module__,
                    "state": {k: self.encode(x, where) for k, x in _object_state(v).items()}}
        raise TypeError(f"StaticGraph.save: cannot store attribute {where} of type "
                        f"{type(v).__name__}")


class _Decoder:
    def __init__(self, arrays, where):
        self.arrays, self.where = arrays, where

    def decode(self, v):
        if isinstance(v, list):
            return [self.decode(x) for x in v]
        if not isinstance(v, dict):
            return v
        (tag, body), = list(v.items())[:1]
        if tag == "$tuple":
            return tuple(self.decode(x) for x in body)
        if tag == "$ref":
            return ValueRef(body)
        if tag == "$array":
            if body not in self.arrays:
                raise GraphFormatError(f"{self.where}: attribute array {body!r} is missing "
                                       "from the weights")
            return self.arrays[body]
        if tag == "$float":
            return float(body)
        if tag == "$scalar":
            return np.dtype(body[0]).type(self.decode(body[1]))
        if tag == "$dtype":
            return np.dtype(body)
        if tag == "$dict":
            return {self.decode(k): self.decode(x) for k, x in body}
        if tag == "$slice":
            return slice(*[self.decode(x) for x in body])
        if tag == "$ellipsis":
            return Ellipsis
        if tag in ("$object", "$namedtuple"):
            return self._object(v, tag)
        raise GraphFormatError(f"{self.where}: unknown attribute tag {tag!r}")

    def _object(self, v, tag):
        cls = A.object_class(v[tag], v.get("module"))
        if cls is None:
            raise GraphFormatError(f"{self.where}: LeZero has no class {v[tag]!r} (needed by "
                                   "a saved attribute; was the graph saved by a newer LeZero?)")
        if tag == "$namedtuple":
            return cls(**{k: self.decode(x) for k, x in v["fields"].items()})
        obj = object.__new__(cls)
        for k, x in v["state"].items():
            object.__setattr__(obj, k, self.decode(x))
        return obj


def _encode_node(enc, node, where):
    return {"op": node.op, "inputs": node.inputs, "outputs": node.outputs,
            "attrs": {k: enc.encode(v, f"{where}.{k}") for k, v in node.attrs.items()
                      if k not in _RUNTIME_ONLY},
            "sub": None if node.sub is None else [
                _encode_node(enc, s, f"{where}.{j}") for j, s in enumerate(node.sub)]}


def save_graph(static_graph, path):
    """Write ``static_graph`` (its current graph) to ``path`` as a ``.lzg`` file."""
    g = static_graph.graph
    enc = _Encoder()
    doc = {"format": FORMAT, "version": VERSION, "name": static_graph.name,
           "inputs": g.inputs, "outputs": g.outputs,
           "values": {n: {"kind": v.kind, "shape": list(v.shape), "dtype": v.dtype.name}
                      for n, v in g.values.items()},
           "params": list(g.params), "consts": list(g.consts),
           "nodes": [_encode_node(enc, n, str(k)) for k, n in enumerate(g.nodes)],
           "out_tree": enc.encode(g.out_tree, "out_tree"),
           "signature": enc.encode(static_graph.signature, "signature"),
           "mode": enc.encode(static_graph.mode, "mode"),
           "meta": {k: v for k, v in g.meta.items() if isinstance(v, (int, float, str))}}
    tensors = {n: cuda.as_numpy(p.data) for n, p in g.params.items()}
    tensors.update({n: cuda.as_numpy(c) for n, c in g.consts.items()})
    tensors.update(enc.arrays)
    weights = io.BytesIO()
    safetensors.write(weights, tensors, {"format": FORMAT})
    text = json.dumps(doc, indent=1)

    def write(f):
        with zipfile.ZipFile(f, "w") as z:
            z.writestr("graph.json", text, compress_type=zipfile.ZIP_DEFLATED)
            z.writestr("weights.safetensors", weights.getvalue(),
                       compress_type=zipfile.ZIP_STORED)
    atomic_write(path, write, where="StaticGraph.save")
    return path


def _read_archive(path):
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            missing = {"graph.json", "weights.safetensors"} - names
            if missing:
                raise GraphFormatError(f"jit.load: {path!r} lacks {sorted(missing)}; it is "
                                       "not a graph written by StaticGraph.save")
            return z.read("graph.json"), z.read("weights.safetensors")
    except zipfile.BadZipFile as e:
        raise GraphFormatError(f"jit.load: {path!r} is not a LeZero graph file or is "
                               f"truncated or corrupt (not a readable zip archive: {e})") from None
    except (EOFError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise GraphFormatError(f"jit.load: cannot read {path!r}: {e}") from None


def _decode_node(dec, d, k):
    if not isinstance(d, dict) or not {"op", "inputs", "outputs", "attrs"} <= d.keys():
        raise GraphFormatError(f"jit.load: node {k} is malformed")
    sub = None if d.get("sub") is None else [_decode_node(dec, s, f"{k}.{j}")
                                             for j, s in enumerate(d["sub"])]
    cls = None
    if sub is None:
        cls = A.function_class(d["op"])
        if cls is None:
            raise GraphFormatError(f"jit.load: node {k} uses operator {d['op']!r}, which this "
                                   "LeZero does not have")
    dec.where = f"jit.load: node {k} ({d['op']})"
    return Node(d["op"], d["inputs"], d["outputs"],
                {a: dec.decode(v) for a, v in d["attrs"].items()}, cls, sub)


def _graph_from(doc, tensors):
    g = Graph()
    for name, v in doc["values"].items():
        g.values[name] = Value(name, v["kind"], v["shape"], v["dtype"])
    for name in doc["params"]:
        g.params[name] = Parameter(tensors[name], name=name)
    for name in doc["consts"]:
        g.consts[name] = tensors[name]
    g.inputs, g.outputs = list(doc["inputs"]), list(doc["outputs"])
    dec = _Decoder(tensors, "jit.load")
    g.nodes = [_decode_node(dec, d, k) for k, d in enumerate(doc["nodes"])]
    for name in list(g.values):
        prefix = name.rstrip("0123456789")
        if name[len(prefix):]:
            g._counter[prefix] = max(g._counter.get(prefix, 0), int(name[len(prefix):]) + 1)
    g.out_tree = dec.decode(doc["out_tree"])
    g.meta = dict(doc.get("meta", {}))
    return g, dec


def load_graph(path):
    """Read a ``.lzg`` file; returns a StaticGraph (see the module docstring)."""
    from lezero.jit.passes.fusion import attach_kernel
    from lezero.jit.static_graph import StaticGraph
    text, blob = _read_archive(path)
    try:
        doc = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GraphFormatError(f"jit.load: graph.json in {path!r} is not valid JSON ({e})") \
            from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise GraphFormatError(f"jit.load: {path!r} is not a LeZero graph (format "
                               f"{doc.get('format') if isinstance(doc, dict) else None!r})")
    if doc.get("version") != VERSION:
        raise GraphFormatError(f"jit.load: {path!r} has format version {doc.get('version')!r}; "
                               f"this LeZero reads version {VERSION}")
    try:
        tensors, _ = safetensors.read(io.BytesIO(blob), where=f"jit.load: {path} weights")
        g, dec = _graph_from(doc, tensors)
    except GraphFormatError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise GraphFormatError(f"jit.load: {path!r} is corrupt ({type(e).__name__}: {e})") \
            from None
    for node in g.nodes:
        if node.sub is not None:
            attach_kernel(g, node)
    signature, mode = dec.decode(doc["signature"]), tuple(dec.decode(doc["mode"]))
    # The weights load as NumPy arrays, so the graph takes NumPy inputs (whatever device
    # it was traced on).
    signature = tuple(tuple(s[:3]) + ("numpy",) if s[0] == "array" else tuple(s)
                      for s in signature)
    return StaticGraph(g, g, signature, mode, name=doc.get("name", "graph"))
