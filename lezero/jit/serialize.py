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

The file is written with ``atomic_write``.  A file is data: loading reads the archive
with bounded sizes (``MAX_GRAPH_JSON``, inflation at most ``MAX_RATIO`` times), parses
the JSON, decodes attributes through an allow-list (``decode``, ``allow``) and checks
the whole graph against itself and the weights (``loadcheck``, ``opchecks``) before
anything runs.  Every problem with the file is a ``GraphFormatError`` naming the file
and what is wrong; a missing file is ``FileNotFoundError``.
"""
import io
import json
import math
import os
import struct
import zipfile
import zlib

import numpy as np

from lezero import cuda
from lezero.core import Parameter
from lezero.jit import allow
from lezero.jit.errors import GraphFormatError
from lezero.jit.ir import ValueRef, _object_state
from lezero.jit.loadcheck import META_KEYS, read_extras, read_graph
from lezero.utils import safetensors
from lezero.utils.files import atomic_write

__all__ = ["save_graph", "load_graph", "FORMAT", "VERSION", "MAX_GRAPH_JSON", "MAX_RATIO"]

FORMAT, VERSION = "lezero-graph", 1
MAX_GRAPH_JSON = 64 << 20       # bytes of graph.json
MAX_RATIO = 100                 # a compressed member inflates at most this many times
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
        if isinstance(v, np.generic) and v.dtype.name in allow.DTYPES:
            return {"$scalar": [v.dtype.name, self.encode(v.item(), where)]}
        if (isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))) \
                and np.dtype(v).name in allow.DTYPES:
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
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return self.encode(int(v) if isinstance(v, int) else float(v), where)
        if allow.helper_key(v) is not None:
            return {"$object": type(v).__name__, "module": type(v).__module__,
                    "state": {k: self.encode(x, where) for k, x in _object_state(v).items()}}
        raise TypeError(f"StaticGraph.save: cannot store attribute {where} of type "
                        f"{type(v).__name__}")


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
           "meta": {k: v for k, v in g.meta.items() if k in META_KEYS}}
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


def _member(z, info, path):
    """The bytes of one archive member, its sizes checked before anything is inflated."""
    limit = MAX_GRAPH_JSON if info.filename == "graph.json" else None
    if info.flag_bits & 0x1:
        raise GraphFormatError(f"jit.load: {path!r}: {info.filename} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise GraphFormatError(f"jit.load: {path!r}: {info.filename} uses compression "
                               f"method {info.compress_type} (only stored or deflated)")
    if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
        raise GraphFormatError(f"jit.load: {path!r}: {info.filename} declares "
                               f"{info.file_size} bytes stored in {info.compress_size}")
    if info.file_size > MAX_RATIO * info.compress_size + (1 << 20) or (
            limit is not None and info.file_size > limit):
        raise GraphFormatError(
            f"jit.load: {path!r}: {info.filename} would inflate {info.compress_size} bytes "
            f"to {info.file_size} (limits: ratio {MAX_RATIO}, graph.json "
            f"{MAX_GRAPH_JSON} bytes)")
    return z.read(info)


def _read_archive(path):
    """(graph.json bytes, weights bytes): exactly the two members, sizes bounded."""
    if isinstance(path, (str, bytes, os.PathLike)) and os.path.exists(path) \
            and not os.path.isfile(path):   # a folder, a pipe or a device would never end
        raise GraphFormatError(f"jit.load: {path!r} is not a regular file")
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            missing = {"graph.json", "weights.safetensors"} - set(names)
            if missing:
                raise GraphFormatError(f"jit.load: {path!r} lacks {sorted(missing)}; it is "
                                       "not a graph written by StaticGraph.save")
            if len(names) != 2:
                raise GraphFormatError(f"jit.load: {path!r} holds members other than "
                                       f"graph.json and weights.safetensors: "
                                       f"{sorted(set(names))[:4]}")
            parts = {i.filename: _member(z, i, path) for i in infos}
            return parts["graph.json"], parts["weights.safetensors"]
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, struct.error,
            NotImplementedError, RuntimeError, OverflowError) as e:
        if isinstance(e, GraphFormatError):
            raise
        raise GraphFormatError(f"jit.load: {path!r} is not a LeZero graph file or is "
                               f"truncated or corrupt (not a readable zip archive: "
                               f"{type(e).__name__}: {e})") from None


def _unique_keys(pairs):
    out = dict(pairs)
    if len(out) != len(pairs):
        raise GraphFormatError("graph.json repeats a key in one object")
    return out


def _parse(text):
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=_unique_keys)
    except RecursionError:
        raise GraphFormatError("graph.json is nested too deeply") from None
    except ValueError as e:             # bad UTF-8, bad JSON, an int of 5000 digits
        raise GraphFormatError(f"graph.json is not valid JSON ({e})") from None


def _weights(blob):
    try:
        tensors, _ = safetensors.read(io.BytesIO(blob), where="weights.safetensors")
    except RecursionError:
        raise GraphFormatError("the weights are corrupt (header nested too deeply)") from None
    except (ValueError, TypeError, KeyError, OverflowError) as e:
        raise GraphFormatError(f"the weights are corrupt ({e})") from None
    return tensors


def _build(doc, blob, shown):
    """The StaticGraph of a parsed document (every check in ``loadcheck``)."""
    from lezero.jit.passes.fusion import attach_kernel
    from lezero.jit.static_graph import StaticGraph
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise GraphFormatError(f"not a LeZero graph (format {str(found)[:40]!r})")
    if type(doc.get("version")) is not int or doc["version"] != VERSION:
        raise GraphFormatError(f"format version {str(doc.get('version'))[:20]}; this "
                               f"LeZero reads version {VERSION}")
    tensors = _weights(blob)
    g, dec = read_graph(doc, tensors)
    signature, mode, name, meta = read_extras(doc, dec, g, tensors)
    g.params = {n: Parameter(a, name=n) for n, a in g.params.items()}
    g.meta = dict(meta, loaded_from=shown)
    for value in g.values:
        prefix = value.rstrip("0123456789")
        if value[len(prefix):]:
            g._counter[prefix] = max(g._counter.get(prefix, 0), int(value[len(prefix):]) + 1)
    for node in g.nodes:
        if node.sub is not None:
            attach_kernel(g, node)
    # The weights load as NumPy arrays, so the graph takes NumPy inputs (whatever device
    # it was traced on).
    signature = tuple(s[:3] + ("numpy",) if s[0] == "array" else s for s in signature)
    static = StaticGraph(g, g, signature, mode, name=name)
    static._current.arrays, static._current.autograd     # noqa: B018 (plans built now)
    return static


def load_graph(path):
    """Read a ``.lzg`` file; returns a StaticGraph (see the module docstring).  Every
    problem with the file is a ``GraphFormatError`` naming it and what is wrong."""
    shown = os.fspath(path) if isinstance(path, (str, bytes, os.PathLike)) else repr(path)
    text, blob = _read_archive(path)
    try:
        return _build(_parse(text), blob, shown)
    except GraphFormatError as e:
        raise GraphFormatError(f"jit.load: {shown!r}: {e}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
            RecursionError, ZeroDivisionError) as e:
        raise GraphFormatError(f"jit.load: {shown!r} is corrupt ({type(e).__name__}: "
                               f"{str(e)[:200]})") from None
