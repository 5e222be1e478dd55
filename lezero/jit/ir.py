"""The graph IR: values (arrays with a static shape and dtype) and nodes (Functions).

A ``Graph`` is a straight-line program in execution order::

    graph(%x: float32[2, 8]) {
      %v0 = Linear(%x, %0.weight, %0.bias)          # float32[2, 16]
      %v1 = ReLU(%v0)                               # float32[2, 16]
      return %v1
    }

* a **value** is an input, a parameter (a live ``Parameter``: training updates are seen by
  the graph), a constant (an array frozen at trace time) or a node's output;
* a **node** names its Function class (``op``, the class name), its input values and its
  output values, and holds ``attrs``: the Function instance's own attributes, copied when
  it was called.  An attribute may be a ``ValueRef``: an array the Function took as a
  constructor argument that was in fact a graph value (``Embedding`` gets its indices
  this way), re-bound on every call;
* a fused node (``op == "Fused"``) keeps the nodes it replaced in ``sub``.
"""
import numpy as np

__all__ = ["Value", "Node", "Graph", "ValueRef", "walk_refs", "resolve_refs", "format_attr"]

KINDS = ("input", "param", "const", "node")


class ValueRef:
    """An attribute that is a graph value: re-bound to the value's array at each call."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, ValueRef) and other.name == self.name

    def __hash__(self):
        return hash(("ValueRef", self.name))

    def __repr__(self):
        return f"%{self.name}"


def _children(obj):
    """The parts of an attribute that may hold ValueRefs (containers, LeZero objects)."""
    if isinstance(obj, (tuple, list)):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    if _is_lezero_object(obj):
        return list(_object_state(obj).values())
    return []


def _is_lezero_object(obj):
    return (not isinstance(obj, (np.ndarray, type)) and hasattr(obj, "__class__")
            and type(obj).__module__.startswith("lezero.")
            and (hasattr(obj, "__dict__") or hasattr(type(obj), "__slots__")))


def _object_state(obj):
    """An object's attributes, from ``__dict__`` and ``__slots__``."""
    state = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
    return state


def walk_refs(obj, depth=0):
    """Every ValueRef inside an attribute value."""
    if isinstance(obj, ValueRef):
        yield obj
    elif depth < 6:
        for child in _children(obj):
            yield from walk_refs(child, depth + 1)


def resolve_refs(obj, lookup):
    """``obj`` with every ValueRef replaced by ``lookup(name)`` (containers rebuilt,
    LeZero objects shallow-copied)."""
    if isinstance(obj, ValueRef):
        return lookup(obj.name)
    if isinstance(obj, tuple):
        return tuple(resolve_refs(x, lookup) for x in obj)
    if isinstance(obj, list):
        return [resolve_refs(x, lookup) for x in obj]
    if isinstance(obj, dict):
        return {k: resolve_refs(v, lookup) for k, v in obj.items()}
    if _is_lezero_object(obj) and any(True for _ in walk_refs(obj)):
        new = object.__new__(type(obj))
        for k, v in _object_state(obj).items():
            object.__setattr__(new, k, resolve_refs(v, lookup))
        return new
    return obj


class Value:
    """One array of the graph: its name, kind, static shape and dtype."""

    __slots__ = ("name", "kind", "shape", "dtype")

    def __init__(self, name, kind, shape, dtype):
        if kind not in KINDS:
            raise ValueError(f"Value: kind must be one of {KINDS}, got {kind!r}")
        self.name, self.kind = name, kind
        self.shape, self.dtype = tuple(int(s) for s in shape), np.dtype(dtype)

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def type_str(self):
        return f"{self.dtype.name}[{', '.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"Value(%{self.name}: {self.type_str()}, {self.kind})"


class Node:
    """One Function call: ``op`` (class name), input and output value names, attributes.

    ``fn_class`` is the Function class to instantiate at replay; ``sub`` holds the nodes a
    fused node replaced (None otherwise)."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "fn_class", "sub")

    def __init__(self, op, inputs, outputs, attrs=None, fn_class=None, sub=None):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = dict(attrs or {})
        self.fn_class = fn_class
        self.sub = sub

    def refs(self):
        """Names of the values the attributes are bound to."""
        return [r.name for v in self.attrs.values() for r in walk_refs(v)]

    def deps(self):
        """Every value this node reads: its inputs, then attribute-bound values."""
        return self.inputs + self.refs()

    def copy(self):
        return Node(self.op, self.inputs, self.outputs, self.attrs, self.fn_class,
                    None if self.sub is None else [n.copy() for n in self.sub])

    def __repr__(self):
        return f"Node({self.op}: {self.inputs} -> {self.outputs})"


def format_attr(value, depth=0):
    """A short readable form of an attribute value for printing."""
    if isinstance(value, ValueRef):
        return repr(value)
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value, separator=",").replace("\n", "")
        return f"array<{value.dtype.name}{list(value.shape)}>"
    if isinstance(value, (tuple, list)) and depth < 2:
        inner = ", ".join(format_attr(v, depth + 1) for v in list(value)[:6])
        more = ", ..." if len(value) > 6 else ""
        return f"({inner}{more})" if isinstance(value, tuple) else f"[{inner}{more}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_attr(v, depth + 1)}"
                               for k, v in list(value.items())[:4]) + "}"
    if _is_lezero_object(value):
        return type(value).__name__
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Graph:
    """A straight-line program: inputs, parameters, constants, nodes, outputs.

    ``params`` maps names to live Parameters, ``consts`` names to arrays; ``out_tree``
    describes how the outputs nest (tuples, lists, dicts) as the traced function returned
    them; ``meta`` holds what passes record (the memory plan, fusion statistics)."""

    def __init__(self):
        self.inputs, self.outputs, self.nodes = [], [], []
        self.values, self.params, self.consts = {}, {}, {}
        self.out_tree = None
        self.meta = {}
        self._counter = {}

    # ----- building --------------------------------------------------------------------
    def new_name(self, prefix="v"):
        while True:
            k = self._counter.get(prefix, 0)
            self._counter[prefix] = k + 1
            name = f"{prefix}{k}"
            if name not in self.values:
                return name

    def add_value(self, name, kind, shape, dtype):
        if name in self.values:
            raise ValueError(f"Graph: value %{name} is defined twice")
        self.values[name] = Value(name, kind, shape, dtype)
        return name

    def add_const(self, array, prefix="c"):
        name = self.new_name(prefix)
        self.consts[name] = array
        self.add_value(name, "const", array.shape, array.dtype)
        return name

    def copy(self):
        """A copy whose node list and tables can change without touching this graph
        (parameters and constant arrays are shared)."""
        g = Graph()
        g.inputs, g.outputs = list(self.inputs), list(self.outputs)
        g.nodes = [n.copy() for n in self.nodes]
        g.values, g.params, g.consts = dict(self.values), dict(self.params), dict(self.consts)
        g.out_tree, g.meta, g._counter = self.out_tree, dict(self.meta), dict(self._counter)
        return g

    # ----- queries ---------------------------------------------------------------------
    def producers(self):
        """{value name: the node that computes it}."""
        return {out: node for node in self.nodes for out in node.outputs}

    def users(self):
        """{value name: [nodes that read it]} (attribute bindings count as reads)."""
        table = {}
        for node in self.nodes:
            for name in node.deps():
                table.setdefault(name, []).append(node)
        return table

    def op_counts(self):
        counts = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return counts

    def prune_values(self):
        """Forget values, parameters and constants that nothing reads or returns."""
        used = set(self.inputs) | set(self.outputs)
        for node in self.nodes:
            for n in [node] + (node.sub or []):
                used.update(n.deps())
                used.update(n.outputs)
        self.values = {k: v for k, v in self.values.items() if k in used}
        self.params = {k: v for k, v in self.params.items() if k in used}
        self.consts = {k: v for k, v in self.consts.items() if k in used}

    # ----- printing --------------------------------------------------------------------
    def _sig(self, name):
        return f"%{name}: {self.values[name].type_str()}"

    def node_line(self, node, indent="  "):
        outs = ", ".join(f"%{o}" for o in node.outputs)
        args = ", ".join(f"%{i}" for i in node.inputs)
        attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in node.attrs.items()
                          if not k.startswith("_"))
        label = node.op
        if "_dropout" in node.attrs:
            label += f"[dropout p={node.attrs['_dropout']['p']}]"
        if node.sub is not None:
            label += "[" + "+".join(n.op for n in node.sub) + "]"
        line = f"{indent}{outs} = {label}({args}{'; ' if attrs and args else ''}{attrs})"
        types = ", ".join(self.values[o].type_str() for o in node.outputs if o in self.values)
        return f"{line:<60} # {types}"

    def __str__(self):
        head = ", ".join(self._sig(i) for i in self.inputs)
        lines = [f"graph({head}) {{"]
        if self.params:
            lines.append(f"  # {len(self.params)} parameters: "
                         + ", ".join(self._sig(p) for p in list(self.params)[:4])
                         + (", ..." if len(self.params) > 4 else ""))
        if self.consts:
            lines.append(f"  # {len(self.consts)} constants")
        lines += [self.node_line(n) for n in self.nodes]
        lines.append("  return " + ", ".join(f"%{o}" for o in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__

    def to_dot(self, title=None):
        """The graph as Graphviz DOT text: boxes for nodes, ellipses for graph inputs,
        parameters and constants (parameters and constants are drawn small)."""
        lines = ["digraph g {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
        if title:
            lines.append(f'  label="{title}"; labelloc=t;')
        producers = self.producers()
        shown = set()

        def leaf(name):
            if name in shown:
                return
            shown.add(name)
            v = self.values[name]
            color = {"input": "orange", "param": "lightgrey", "const": "white"}[v.kind]
            label = name if v.kind != "const" else v.type_str()
            lines.append(f'  "{name}" [label="{label}", shape=ellipse, style=filled, '
                         f'fillcolor={color}, fontsize=9];')

        for k, node in enumerate(self.nodes):
            label = node.op if node.sub is None else "Fused\\n" + "+".join(
                n.op for n in node.sub)
            color = "lightblue" if node.sub is None else "palegreen"
            lines.append(f'  n{k} [label="{label}", shape=box, style=filled, '
                         f'fillcolor={color}];')
        index = {id(n): k for k, n in enumerate(self.nodes)}
        for k, node in enumerate(self.nodes):
            for name in node.deps():
                src = producers.get(name)
                if src is None:
                    leaf(name)
                    lines.append(f'  "{name}" -> n{k};')
                else:
                    lines.append(f'  n{index[id(src)]} -> n{k} '
                                 f'[label="{self.values[name].type_str()}", fontsize=8];')
        for out in self.outputs:
            src = producers.get(out)
            lines.append(f'  "out:{out}" [label="output", shape=ellipse, style=filled, '
                         'fillcolor=orange];')
            lines.append(f'  {"n%d" % index[id(src)] if src else chr(34) + out + chr(34)}'
                         f' -> "out:{out}";')
        lines.append("}")
        return "\n".join(lines) + "\n"
