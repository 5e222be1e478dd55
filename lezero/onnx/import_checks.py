"""What ``onnx.load`` accepts from a file, checked before any of it is used.

An ONNX file is data.  ``read_model(path)`` parses it without letting ``onnx`` follow
external data, then ``check_model`` refuses, with an ``OnnxImportError`` naming the file
and what is wrong:

* external data whose ``location`` is absolute, climbs out of the model's folder
  (``..``), passes through a symbolic link, is not a regular file, or whose ``offset`` /
  ``length`` fall outside that file or disagree with the tensor's dims (the data is read
  here, within those bounds);
* tensors of a type other than booleans, integers and floats (``TENSOR_TYPES``), with
  negative dims, more than ``MAX_DIMS`` dims or ``MAX_ELEMENTS`` elements, or whose stored
  data does not hold exactly dims x itemsize bytes (or values);
* nodes of another domain than ONNX's own, attributes of a kind LeZero does not read
  (lists of subgraphs, sparse tensors, type protos) or of another type than the
  operator's schema declares, required attributes that are missing, input or output
  counts outside the schema;
* graphs that read a value before it is defined (undefined names, cycles), define a
  value twice, or name an undefined output; more than ``MAX_NODES`` nodes in all.
  Subgraphs (the GRAPH attributes of If, Loop and Scan) are checked the same way, the
  values of their enclosing graphs visible, nested at most ``MAX_DEPTH`` deep.

Operators without a LeZero implementation are refused by the importer, naming them.
"""
import os

import numpy as np

__all__ = ["read_model", "check_model", "tensor_array", "attribute_value", "bounded",
           "subgraphs", "MAX_ELEMENTS", "MAX_DIMS", "MAX_NODES", "MAX_DEPTH", "TENSOR_TYPES"]

MAX_DIMS = 32
MAX_ELEMENTS = 2 ** 40          # of a stored tensor
MAX_RESULT = 2 ** 31            # of an array a shape operator builds at run time
MAX_NODES = 1_000_000          # in the model, subgraphs included
MAX_DEPTH = 16                 # subgraphs within subgraphs
# data type -> (itemsize, the typed field that holds values when raw_data is empty)
TENSOR_TYPES = {1: (4, "float_data"), 2: (1, "int32_data"), 3: (1, "int32_data"),
                4: (2, "int32_data"), 5: (2, "int32_data"), 6: (4, "int32_data"),
                7: (8, "int64_data"), 9: (1, "int32_data"), 10: (2, "int32_data"),
                11: (8, "double_data"), 12: (4, "uint64_data"), 13: (8, "uint64_data"),
                16: (2, "int32_data")}
_ATTR_KINDS = {1: "f", 2: "i", 3: "s", 4: "t", 5: "g", 6: "floats", 7: "ints", 8: "strings"}


def _error(text):
    from lezero.onnx.importer import OnnxImportError
    return OnnxImportError(text)


def _onnx():
    from lezero.onnx._deps import onnx
    return onnx()


def read_model(path, source):
    """The parsed ModelProto of ``path``, external data read and checked."""
    onnx = _onnx()
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception as e:          # protobuf raises DecodeError and friends
        raise _error(f"onnx.load: {source!r} is not a readable ONNX model (corrupt or "
                     f"truncated: {type(e).__name__}: {str(e)[:200]})") from None
    if not proto.graph.node and not proto.graph.output:
        raise _error(f"onnx.load: {source!r} holds no graph (is it an ONNX file?)")
    folder = os.path.dirname(os.path.abspath(path))
    for where, tensor in _tensors(proto.graph, f"onnx.load: {source!r}"):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            _load_external(tensor, folder, where)
    return proto


def subgraphs(node, where, depth):
    """(attribute name, GraphProto) of ``node``'s subgraph attributes, which lie at nesting
    ``depth`` (the main graph is 0); deeper than ``MAX_DEPTH`` is refused."""
    found = [(a.name, a.g) for a in node.attribute if a.type == 5]
    if found and depth > MAX_DEPTH:
        raise _error(f"{where}: subgraphs nested {depth} deep (at most {MAX_DEPTH})")
    return found


def _tensors(graph, where, depth=0):
    """(where, TensorProto) for the initializers and the tensor attributes of the nodes
    of ``graph`` (at ``where``), those of the subgraphs included."""
    for t in graph.initializer:
        yield f"{where}: initializer {t.name[:80]!r}", t
    for k, node in enumerate(graph.node):
        for a in node.attribute:
            if a.HasField("t"):
                yield f"{where}: node {k} attribute {a.name!r}", a.t
        for name, sub in subgraphs(node, f"{where}: node {k}", depth + 1):
            yield from _tensors(sub, f"{where}: node {k} subgraph {name!r}", depth + 1)


def _inside(folder, location):
    """The real path of ``location`` under ``folder``, or a reason to refuse it."""
    if not location or "\x00" in location or os.path.isabs(location) or \
            location.startswith(("/", "\\")) or ":" in location:
        return None, f"its location {location[:80]!r} is not a relative path"
    parts = location.replace("\\", "/").split("/")
    if ".." in parts:
        return None, f"its location {location[:80]!r} climbs out of the model's folder"
    base = os.path.realpath(folder)
    target = os.path.normpath(os.path.join(base, *parts))
    if os.path.realpath(target) != target:
        return None, f"its location {location[:80]!r} passes through a symbolic link"
    if not os.path.isfile(target):
        return None, f"its location {location[:80]!r} is not a file next to the model"
    return target, None


def _load_external(tensor, folder, where):
    info = {e.key: e.value for e in tensor.external_data}
    target, problem = _inside(folder, info.get("location", ""))
    if problem:
        raise _error(f"{where}: external data refused: {problem}")
    size = os.path.getsize(target)
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else size - offset
    except ValueError:
        raise _error(f"{where}: external data offset/length are not integers") from None
    count, itemsize = _count(tensor, where), TENSOR_TYPES.get(tensor.data_type, (0,))[0]
    if offset < 0 or length < 0 or offset + length > size:
        raise _error(f"{where}: external data [{offset}, {offset + length}) lies outside "
                     f"{os.path.basename(target)!r} ({size} bytes)")
    if length != count * itemsize:
        raise _error(f"{where}: external data holds {length} bytes, but dims "
                     f"{list(tensor.dims)} need {count * itemsize}")
    with open(target, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise _error(f"{where}: external data file is shorter than declared")
    tensor.raw_data = data
    tensor.data_location = _onnx().TensorProto.DEFAULT
    del tensor.external_data[:]


def _count(tensor, where):
    if tensor.data_type not in TENSOR_TYPES:
        raise _error(f"{where}: tensor type {tensor.data_type} is not supported (LeZero "
                     "reads booleans, integers and floats)")
    dims = list(tensor.dims)
    if len(dims) > MAX_DIMS or any(d < 0 for d in dims):
        raise _error(f"{where}: invalid dims {dims[:8]}")
    count = 1
    for d in dims:
        count *= d
    if count > MAX_ELEMENTS:
        raise _error(f"{where}: dims {dims[:8]} declare {count} elements (at most "
                     f"{MAX_ELEMENTS})")
    return count


def tensor_array(tensor, where):
    """A TensorProto as a NumPy array, after checking its type, dims and data size."""
    count = _count(tensor, where)
    itemsize, field = TENSOR_TYPES[tensor.data_type]
    if tensor.HasField("segment") or tensor.data_location != 0:
        raise _error(f"{where}: segmented or unresolved external tensors are not supported")
    if tensor.raw_data:
        if len(tensor.raw_data) != count * itemsize:
            raise _error(f"{where}: raw data holds {len(tensor.raw_data)} bytes, but dims "
                         f"{list(tensor.dims)} need {count * itemsize}")
    elif len(getattr(tensor, field)) != count:
        raise _error(f"{where}: holds {len(getattr(tensor, field))} values, but dims "
                     f"{list(tensor.dims)} need {count}")
    try:
        return np.array(_onnx().numpy_helper.to_array(tensor))
    except Exception as e:
        raise _error(f"{where}: cannot be read ({type(e).__name__}: {e})") from None


def attribute_value(a, where):
    """The Python value of an attribute LeZero reads (numbers, strings, tensors, lists)."""
    kind = _ATTR_KINDS.get(a.type)
    if kind is None or a.ref_attr_name:
        raise _error(f"{where}: attribute {a.name!r} is of a kind LeZero does not read "
                     f"(type {a.type}: lists of subgraphs, sparse tensors and references are "
                     "not supported)")
    if kind == "t":
        return tensor_array(a.t, f"{where} attribute {a.name!r}")
    if kind == "g":
        return a.g                      # the importer parses it (checked by check_model)
    value = getattr(a, kind)
    try:
        if kind == "s":
            return value.decode("utf-8")
        if kind == "strings":
            return [s.decode("utf-8") for s in value]
    except UnicodeDecodeError:
        raise _error(f"{where}: attribute {a.name!r} is not UTF-8 text") from None
    return list(value) if kind in ("floats", "ints") else value


def _schema(op, opset):
    defs = _onnx().defs
    for args in ((op, opset, ""), (op, "")):
        try:
            return defs.get_schema(*args)
        except Exception:            # SchemaError: not at this opset (LeZero is lenient)
            continue
    return None


def _check_node(node, opset, where):
    if node.domain not in ("", "ai.onnx"):
        raise _error(f"{where} uses operator {node.op_type!r} of domain {node.domain!r}; "
                     "LeZero imports ONNX's own operators only")
    schema = _schema(node.op_type, opset)
    if schema is None:
        return
    declared = {name: int(a.type.value) for name, a in schema.attributes.items()}
    for a in node.attribute:
        if a.name not in declared:
            raise _error(f"{where}: attribute {a.name!r} is not one {node.op_type} takes")
        if a.type != declared[a.name]:
            raise _error(f"{where}: attribute {a.name!r} has type {a.type}, but "
                         f"{node.op_type} declares type {declared[a.name]}")
    given = {a.name for a in node.attribute}
    missing = [n for n, a in schema.attributes.items() if a.required and n not in given]
    if missing:
        raise _error(f"{where}: required attribute {missing[0]!r} is missing")
    if not (schema.min_input <= len(node.input) <= schema.max_input
            and schema.min_output <= len(node.output) <= schema.max_output):
        raise _error(f"{where}: has {len(node.input)} inputs and {len(node.output)} outputs; "
                     f"{node.op_type} takes {schema.min_input}-{schema.max_input} and "
                     f"{schema.min_output}-{schema.max_output}")


def check_model(proto, opset, source):
    """Refuse graphs whose structure or nodes are malformed (see the module docstring)."""
    g = proto.graph
    if len(g.sparse_initializer):
        raise _error(f"onnx.load: {source!r}: sparse initializers are not supported")
    _check_graph(g, opset, f"onnx.load: {source!r}", set(), 0, [0])


def _graph_names(g, where):
    """The names a graph defines before its first node: initializers and inputs."""
    defined = set()
    for name in [i.name for i in g.initializer] + [i.name for i in g.input]:
        if not name:
            raise _error(f"{where}: a graph input or initializer has no name")
        defined.add(name)
    if len({i.name for i in g.initializer}) != len(g.initializer):
        raise _error(f"{where}: two initializers have the same name")
    return defined


def _check_graph(g, opset, where, outer, depth, count):
    """Check graph ``g`` nested ``depth`` deep, the names ``outer`` visible from the
    enclosing graphs; ``count`` ([nodes so far]) bounds the nodes of the whole model."""
    count[0] += len(g.node)
    if count[0] > MAX_NODES:
        raise _error(f"{where}: {count[0]} nodes (at most {MAX_NODES})")
    defined = _graph_names(g, where)
    for k, node in enumerate(g.node):
        here = f"{where}: node {k} {node.name[:80]!r} ({node.op_type[:80]})"
        _check_node(node, opset, here)
        undefined = [n for n in node.input if n and n not in defined and n not in outer]
        if undefined:
            raise _error(f"{here} reads {undefined[0][:80]!r} before it is defined")
        for name, sub in subgraphs(node, here, depth + 1):
            _check_graph(sub, opset, f"{here} subgraph {name!r}", outer | defined,
                         depth + 1, count)
        for name in node.output:
            if name in defined:
                raise _error(f"{here} defines {name[:80]!r} a second time")
            if name:
                defined.add(name)
    missing = [o.name for o in g.output if o.name not in defined and o.name not in outer]
    if missing:
        raise _error(f"{where}: output {missing[0][:80]!r} is never computed")


def bounded(node, shape):
    """``shape`` (a tuple of ints) when an array of it is a sane size to build."""
    count = 1
    for d in shape:
        if d < 0:
            raise ValueError(f"{node.where()}: negative dimension in shape {shape}")
        count *= d
    if count > MAX_RESULT:
        raise ValueError(f"{node.where()}: the result would hold {count} elements (at most "
                         f"{MAX_RESULT})")
    return shape
