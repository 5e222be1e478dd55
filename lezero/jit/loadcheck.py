"""Checks of a ``.lzg`` file's graph before anything in it runs.

``read_graph(doc, tensors)`` turns the parsed ``graph.json`` and the weights into a
``Graph`` and refuses, with a ``GraphFormatError`` saying what is wrong, anything that
does not hold together:

* the document has exactly the known keys, each of the right JSON type;
* every value has a known kind, a numeric dtype (``allow.DTYPES``) and a shape of at most
  ``MAX_DIMS`` non-negative dims and ``MAX_ELEMENTS`` elements; names are printable;
* every parameter and constant is in the weights with exactly the recorded shape and
  dtype, and the weights hold nothing the graph does not name;
* nodes are in execution order: each input (and attribute-bound value) is defined
  before it is read, each output is defined once; operators and attribute objects are
  allow-listed (``allow``), attribute names are data (never a method of the class),
  and the per-operator checks of ``opchecks`` hold;
* a fused node's parts are elementwise operators chained from its inputs to its output,
  with shapes that broadcast to the output (its kernel is generated from them);
* the signature matches the inputs, the output tree points at existing outputs.
"""
from lezero.jit import allow, opchecks
from lezero.jit.decode import Decoder
from lezero.jit.errors import GraphFormatError
from lezero.jit.ir import KINDS, Graph, Node, Value
from lezero.jit.passes.codegen import ELEMENTWISE, check_attrs

__all__ = ["read_graph", "read_extras", "MAX_DIMS", "MAX_ELEMENTS", "META_KEYS"]

MAX_DIMS = 32
MAX_ELEMENTS = 2 ** 40
MAX_NAME = 1024
REQUIRED = ("format", "version", "inputs", "outputs", "values", "params", "consts", "nodes",
            "out_tree", "signature", "mode")
OPTIONAL = ("name", "meta")
META_KEYS = ("fused_groups", "cse_merged", "folded")
_NODE_KEYS = {"op", "inputs", "outputs", "attrs", "sub"}
_RUNTIME_ATTRS = {"_dropout", "_nograd", "_detach"}
_GRAPH_KEYS = {"inputs", "outputs", "generation", "needs_input_grad", "output_meta",
               "forward", "backward", "backward_arrays"}


def _bad(text):
    raise GraphFormatError(text)


def _typed(value, kind, what):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _bad(f"{what} must be a {getattr(kind, '__name__', 'value')}, got "
             f"{type(value).__name__}")
    return value


def name_of(value, what):
    """A value or graph name: a printable string without quotes or backslashes."""
    if not (isinstance(value, str) and 0 < len(value) <= MAX_NAME and value.isprintable()
            and '"' not in value and "\\" not in value):
        _bad(f"{what} {str(value)[:60]!r} is not a valid name (printable, at most "
             f"{MAX_NAME} characters, no quotes or backslashes)")
    return value


def check_shape(shape, what):
    """A list or tuple of non-negative ints, at most MAX_DIMS long and MAX_ELEMENTS big."""
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS or not all(
            type(d) is int and 0 <= d <= MAX_ELEMENTS for d in shape):
        _bad(f"{what} has an invalid shape {str(shape)[:80]} (at most {MAX_DIMS} "
             "non-negative ints)")
    count = 1
    for d in shape:
        count *= d
    if count > MAX_ELEMENTS:
        _bad(f"{what} declares {count} elements (at most {MAX_ELEMENTS})")
    return tuple(shape)


def _values(doc):
    values = {}
    for name, v in _typed(doc["values"], dict, "values").items():
        name_of(name, "value")
        if not isinstance(v, dict) or set(v) != {"kind", "shape", "dtype"}:
            _bad(f"value %{name} must be {{kind, shape, dtype}}")
        if v["kind"] not in KINDS:
            _bad(f"value %{name} has unknown kind {str(v['kind'])[:20]!r}")
        dtype = allow.dtype_of(v["dtype"], f"value %{name}'s dtype")
        values[name] = Value(name, v["kind"], check_shape(v["shape"], f"value %{name}"),
                             dtype)
    return values


def _names(doc, key, values, kind):
    """The list ``doc[key]``: unique names of values of ``kind``, all of them."""
    names = _typed(doc[key], list, key)
    for n in names:
        if not isinstance(n, str) or n not in values or values[n].kind != kind:
            _bad(f"{key} lists {str(n)[:60]!r}, which is not a value of kind {kind!r}")
    if len(set(names)) != len(names):
        _bad(f"{key} lists a value twice")
    missing = sorted(n for n, v in values.items() if v.kind == kind and n not in names)
    if missing:
        _bad(f"values {missing[:3]} are of kind {kind!r} but not listed in {key}")
    return names


def _stored(name, values, tensors):
    """The weights' tensor for a parameter or constant, checked against the graph."""
    if name not in tensors:
        _bad(f"{values[name].kind} %{name} is missing from the weights")
    array, v = tensors[name], values[name]
    if tuple(array.shape) != v.shape or array.dtype != v.dtype:
        _bad(f"the weights hold %{name} as {array.dtype.name}{list(array.shape)}, but the "
             f"graph records {v.type_str()}")
    return array


def _attr_key(cls, key, op):
    """An attribute name the file may set: data, never a method, property or link."""
    import inspect
    if not isinstance(key, str) or not key.isidentifier() or key.startswith("__") or \
            key in _GRAPH_KEYS or (key.startswith("_") and key not in _RUNTIME_ATTRS):
        _bad(f"node ({op}) has an attribute named {str(key)[:40]!r}, which a graph may "
             "not set")
    if cls is not None:
        found = inspect.getattr_static(cls, key, None)
        if callable(found) or hasattr(type(found), "__get__"):
            _bad(f"node ({op}) has an attribute {key!r} that would replace a method or "
                 f"property of {cls.__name__}")


def _node_head(d, where):
    if not isinstance(d, dict) or not {"op", "inputs", "outputs", "attrs"} <= set(d) \
            or not set(d) <= _NODE_KEYS:
        _bad(f"{where} is malformed (expected op, inputs, outputs, attrs and sub)")
    _typed(d["op"], str, f"{where} op")
    ins = _typed(d["inputs"], list, f"{where} inputs")
    outs = _typed(d["outputs"], list, f"{where} outputs")
    _typed(d["attrs"], dict, f"{where} attrs")
    if not outs or not all(isinstance(n, str) for n in ins + outs):
        _bad(f"{where} must name its inputs and at least one output as strings")
    return ins, outs


class _Reader:
    """Decodes the nodes in order, tracking which values are defined."""

    def __init__(self, values, decoder, defined):
        self.values, self.decoder = values, decoder
        self.defined, self.taken = set(defined), set(defined)

    def _define(self, outs, where):
        for name in outs:
            v = self.values.get(name)
            if v is None or v.kind != "node":
                _bad(f"{where} outputs %{name[:60]}, which is not a node value")
            if name in self.taken:
                _bad(f"{where} defines %{name[:60]} a second time")
            self.taken.add(name)

    def _read(self, d, where, defined):
        ins, outs = _node_head(d, where)
        op = d["op"]
        cls = None if op == "Fused" else allow.function_class(op)
        if cls is None and op != "Fused":
            _bad(f"{where} uses operator {op[:60]!r}, which this LeZero does not have "
                 "(a graph may name LeZero's own operators only)")
        undefined = [n for n in ins if n not in defined]
        if undefined:
            _bad(f"{where} ({op}) reads %{undefined[0][:60]} before it is defined")
        for key in d["attrs"]:
            _attr_key(cls, key, op)
        attrs = {k: self.decoder.decode(v) for k, v in d["attrs"].items()}
        node = Node(op, ins, outs, attrs, cls)
        bad = [n for n in node.refs() if n not in defined]
        if bad:
            _bad(f"{where} ({op}) binds an attribute to %{bad[0][:60]}, which is not "
                 "defined before it")
        opchecks.check_runtime_attrs(node, self.values)
        return node

    def node(self, d, where):
        node = self._read(d, where, self.defined)
        if node.op == "Fused":
            self._fused(node, d.get("sub"), where)
        elif d.get("sub") is not None:
            _bad(f"{where} ({node.op}) has parts, but only a Fused node may")
        else:
            opchecks.check_node(node, self.values)
        self._define(node.outputs, where)
        self.defined.update(node.outputs)
        return node

    def _fused(self, node, sub, where):
        """A fused node: its parts chain elementwise operators from its inputs."""
        if node.attrs or len(node.outputs) != 1 or not isinstance(sub, list) or not sub:
            _bad(f"{where} (Fused) must have one output, no attributes and a list of parts")
        local, parts = set(node.inputs), []
        for j, d in enumerate(sub):
            part = self._read(d, f"{where} part {j}", local)
            arity = ELEMENTWISE.get(part.op, (None,))[0]
            if arity is None or d.get("sub") is not None or len(part.outputs) != 1 \
                    or len(part.inputs) != arity or part.refs() or \
                    "_dropout" in part.attrs:
                _bad(f"{where} part {j} ({part.op}) is not an elementwise operator with "
                     f"{arity or 'its'} inputs and one output")
            problem = check_attrs(part.op, part.attrs)
            if problem:
                _bad(f"{where} part {j} ({part.op}): {problem}")
            if j < len(sub) - 1:          # the last part's output is the node's
                self._define(part.outputs, f"{where} part {j}")
            local.update(part.outputs)
            parts.append(part)
        if parts[-1].outputs != node.outputs:
            _bad(f"{where} (Fused): its last part does not compute its output")
        opchecks.check_fused(node, parts, self.values)
        node.sub = parts


def _check_tree(tree, n_outputs, depth=0):
    """The output tree: ("var", k) leaves, ("dict", [(key, tree)]), ("const", value) and
    containers (kind, [trees])."""
    if depth > 32 or not isinstance(tree, tuple) or len(tree) != 2 \
            or not isinstance(tree[0], str):
        _bad("out_tree is malformed")
    kind, body = tree
    if kind == "var":
        if type(body) is not int or not 0 <= body < n_outputs:
            _bad(f"out_tree refers to output {str(body)[:20]}, but the graph has "
                 f"{n_outputs}")
    elif kind == "dict":
        for pair in _typed(body, list, "out_tree dict"):
            if not isinstance(pair, tuple) or len(pair) != 2:
                _bad("out_tree dict entries must be (key, tree) pairs")
            _check_tree(pair[1], n_outputs, depth + 1)
    elif kind != "const":
        for sub in _typed(body, list, f"out_tree {kind[:20]}"):
            _check_tree(sub, n_outputs, depth + 1)


def check_signature(signature, mode, values, inputs):
    """The guard's signature: one ("array", shape, dtype, backend) per graph input, in
    order, agreeing with the input's value; ("static", value) for other arguments."""
    if not isinstance(signature, tuple) or not all(isinstance(s, tuple) and s
                                                   for s in signature):
        _bad("signature is malformed")
    arrays = [s for s in signature if s[0] == "array"]
    if any(s[0] not in ("array", "static") or len(s) != (4 if s[0] == "array" else 2)
           for s in signature) or len(arrays) != len(inputs):
        _bad(f"signature does not describe the {len(inputs)} graph inputs")
    for s, name in zip(arrays, inputs):
        v = values[name]
        if s[1] != v.shape or s[2] != v.dtype.name:
            _bad(f"signature has {s[2]}{list(s[1]) if isinstance(s[1], tuple) else s[1]} "
                 f"for input %{name}, which the graph records as {v.type_str()}")
    if not (isinstance(mode, tuple) and len(mode) == 2 and isinstance(mode[0], bool)
            and (mode[1] is None or isinstance(mode[1], bool))):
        _bad(f"mode must be (bool, bool or null), got {str(mode)[:40]}")


def _check_document(doc):
    missing = [k for k in REQUIRED if k not in doc]
    extra = sorted(k for k in doc if k not in REQUIRED + OPTIONAL)
    if missing or extra:
        _bad(f"graph.json lacks {missing}" if missing else f"graph.json has unknown keys "
             f"{[str(k)[:40] for k in extra[:5]]}")
    _typed(doc["nodes"], list, "nodes")


def read_graph(doc, tensors):
    """The Graph of a parsed document (see the module docstring) and its Decoder."""
    _check_document(doc)
    g = Graph()
    g.values = values = _values(doc)
    g.inputs = _names(doc, "inputs", values, "input")
    for name in _names(doc, "params", values, "param"):
        g.params[name] = _stored(name, values, tensors)
    for name in _names(doc, "consts", values, "const"):
        g.consts[name] = _stored(name, values, tensors)
    dec = Decoder(tensors)
    reader = _Reader(values, dec, set(g.inputs) | set(g.params) | set(g.consts))
    g.nodes = [reader.node(d, f"node {k}") for k, d in enumerate(doc["nodes"])]
    g.outputs = _typed(doc["outputs"], list, "outputs")
    undefined = [n for n in g.outputs if not isinstance(n, str) or n not in reader.defined]
    if not g.outputs or undefined:
        _bad(f"outputs name {str(undefined[:1])[:60] or 'nothing'}, not a defined value")
    g.out_tree = dec.decode(doc["out_tree"])
    _check_tree(g.out_tree, len(g.outputs))
    return g, dec


def read_extras(doc, dec, g, tensors):
    """(signature, mode, name, meta), checked; also refuses unused weights."""
    signature, mode = dec.decode(doc["signature"]), dec.decode(doc["mode"])
    mode = tuple(mode) if isinstance(mode, list) else mode
    check_signature(signature, mode, g.values, g.inputs)
    unused = sorted(set(tensors) - set(g.params) - set(g.consts) - dec.used)
    if unused:
        _bad(f"the weights hold tensors the graph does not use: {unused[:3]}")
    meta = _typed(doc.get("meta", {}), dict, "meta")
    if any(k not in META_KEYS or type(v) is not int or v < 0 for k, v in meta.items()):
        _bad(f"meta must map {META_KEYS} to counts, got {str(meta)[:80]}")
    name = name_of(doc.get("name", "graph"), "graph name")
    return signature, mode, name, dict(meta)
