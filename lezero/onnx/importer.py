"""``onnx.load``: an ONNX model as a LeZero ``nn.Module`` that runs and fine-tunes.

The file is parsed once.  Floating-point initializers become ``Parameter``s (registered
under sanitised names, ``conv1.weight`` -> ``conv1_weight``; ``onnx_names`` maps them
back), except the running statistics of ``BatchNormalization``, which become buffers;
other initializers and ``Constant`` nodes become constant arrays.  ``forward(*inputs)``
interprets the nodes in order with LeZero operators (``lezero.onnx.import_ops``), so a
loss computed from the outputs back-propagates into the parameters.  Shape arithmetic
(``Shape``, ``Gather`` on shapes, ``Concat`` of ints ...) runs on plain NumPy arrays.

Every operator is checked at load time: one without an implementation raises
``OnnxImportError`` naming it and its node; so does a file that is not ONNX, and every
malformed or hostile part of one (``lezero.onnx.import_checks``: external data outside
the model's folder, tensors whose data does not match their dims, attributes of the
wrong type, undefined values ...).  A node that fails at run time is an
``OnnxImportError`` naming the file and the node.

Subgraphs (the GRAPH attributes of ``If``, ``Loop`` and ``Scan``) are parsed into
``_Graph``s; an operator runs one with ``module.run_subgraph(graph, inputs)``, which sees
the values of the enclosing graphs, as ONNX scoping says.  A subgraph's initializers are
constants (not trained).
"""
import collections
import os
import re

import numpy as np

from lezero import cuda
from lezero.core import Parameter, Variable
from lezero.nn import Module
from lezero.utils.files import FileFormatError
from lezero.onnx.import_checks import (attribute_value, check_model, read_model, subgraphs,
                                       tensor_array)

__all__ = ["OnnxImportError", "OnnxModule", "load"]


class OnnxImportError(FileFormatError):
    """An ONNX file LeZero cannot load; the message names the file, and the operator and
    node where one is at fault (a ``FileFormatError``, so a ``ValueError``)."""


def _safe(name, taken):
    base = re.sub(r"\W", "_", name) or "param"
    if base[0].isdigit():
        base = "p_" + base
    out, k = base, 1
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


class _Node:
    """One ONNX node, parsed: op type, input/output names and Python attributes."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "name", "index", "source", "scoped")

    def __init__(self, proto, index, source="<onnx>"):
        self.op, self.index = proto.op_type, index
        self.inputs, self.outputs = list(proto.input), list(proto.output)
        self.name = proto.name or f"{proto.op_type}_{index}"
        self.source = source
        self.attrs = {}
        self.scoped = False             # True when it holds subgraphs

    def read_attributes(self, proto, depth=0):
        """Attributes as Python values (checked by ``import_checks.attribute_value``);
        a subgraph becomes a ``_Graph`` (this node lies at nesting ``depth``)."""
        where = f"onnx.load: {self.source!r}: {self.where()}"
        for a in proto.attribute:
            value = attribute_value(a, where)
            if a.type == 5:
                value, self.scoped = _Graph(value, self.source, depth + 1), True
            self.attrs[a.name] = value

    def where(self):
        return f"node {self.index} {self.name[:80]!r} ({self.op[:80]})"


class _Graph:
    """A subgraph, parsed: nodes (attributes read), constant initializers and the names
    of its inputs and outputs."""

    def __init__(self, proto, source, depth):
        self.nodes = [_Node(n, k, source) for k, n in enumerate(proto.node)]
        for node, p in zip(self.nodes, proto.node):
            node.read_attributes(p, depth)
        self.consts = {t.name: tensor_array(t, f"onnx.load: {source!r}: subgraph "
                                               f"initializer {t.name[:80]!r}")
                       for t in proto.initializer}
        self.input_names = [i.name for i in proto.input if i.name not in self.consts]
        self.output_names = [o.name for o in proto.output]
        self.output_info = [_declared(o) for o in proto.output]


def _declared(value_info):
    """(elem_type, dims) a graph output declares; 0 / None where it does not."""
    t = value_info.type.tensor_type
    if value_info.type.WhichOneof("value") != "tensor_type" or not t.HasField("shape"):
        return t.elem_type, None
    return t.elem_type, [d.dim_value if d.HasField("dim_value") else None
                         for d in t.shape.dim]


class _Scope:
    """What an operator holding subgraphs gets as ``module``: the module (its attributes
    read through) and the values in scope, so ``run_subgraph`` can see them."""

    def __init__(self, module, env):
        self._module, self._env = module, env

    def __getattr__(self, name):
        return getattr(self._module, name)

    def run_subgraph(self, graph, inputs):
        """The outputs (a list) of ``graph`` run with its inputs bound to ``inputs``."""
        if len(inputs) != len(graph.input_names):
            raise ValueError(f"the subgraph takes {len(graph.input_names)} inputs "
                             f"({', '.join(graph.input_names)}), got {len(inputs)}")
        env = collections.ChainMap(dict(graph.consts), self._env)
        env.maps[0].update(zip(graph.input_names, inputs))
        return self._module._run(graph.nodes, env, graph.output_names)


def _unsupported(graph, source, depth=0):
    """The nodes (protos), subgraphs included, whose operator LeZero cannot import."""
    from lezero.onnx.import_ops import IMPORT_OPS
    missing = []
    for k, n in enumerate(graph.node):
        if n.op_type not in IMPORT_OPS:
            missing.append(_Node(n, k, source))
        for _, sub in subgraphs(n, f"onnx.load: {source!r}: node {k} {n.name[:80]!r}",
                                depth + 1):
            missing += _unsupported(sub, source, depth + 1)
    return missing


def _read(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"onnx.load: no such file {path!r}")
    if not os.path.isfile(path):        # a folder, a pipe or a device would never end
        raise OnnxImportError(f"onnx.load: {path!r} is not a regular file")
    return read_model(path, path)


def _opset(proto):
    for op in proto.opset_import:
        if op.domain in ("", "ai.onnx"):
            return int(op.version)
    return 13


class OnnxModule(Module):
    """A LeZero Module interpreting an ONNX graph (see the module docstring).

    Attributes: ``input_names``, ``output_names``, ``opset``, ``onnx_names`` ({attribute
    name: ONNX initializer name})."""

    def __init__(self, proto, source="<onnx>"):
        super().__init__()
        from lezero.onnx.import_ops import IMPORT_OPS
        g = proto.graph
        self.source, self.opset = source, _opset(proto)
        nodes = [_Node(n, k, source) for k, n in enumerate(g.node)]
        missing = _unsupported(g, source)
        if missing:
            n = missing[0]
            more = f" (and {len(missing) - 1} more nodes)" if len(missing) > 1 else ""
            raise OnnxImportError(f"onnx.load: {source}: {n.where()} uses operator "
                                  f"{n.op[:80]!r}, which LeZero cannot import{more}; "
                                  f"supported: {', '.join(sorted(IMPORT_OPS))}")
        check_model(proto, self.opset, source)
        for node, p in zip(nodes, g.node):
            node.read_attributes(p)
        stats = {n.inputs[k] for n in nodes if n.op == "BatchNormalization"
                 for k in (3, 4) if len(n.inputs) > k}
        taken, self.onnx_names, self._slots = set(), {}, {}
        consts = {}
        for init in g.initializer:
            array = tensor_array(init, f"onnx.load: {source!r}: initializer "
                                       f"{init.name[:80]!r}")
            if array.dtype.kind == "f" and init.name not in stats:
                attr = _safe(init.name, taken)
                self.register_parameter(attr, Parameter(array, name=init.name))
                self.onnx_names[attr] = init.name
                self._slots[init.name] = ("param", attr)
            elif array.dtype.kind == "f":
                attr = _safe(init.name, taken)
                self.register_buffer(attr, array)
                self.onnx_names[attr] = init.name
                self._slots[init.name] = ("buffer", attr)
            else:
                consts[init.name] = array
        init_names = {i.name for i in g.initializer}
        self.input_names = [i.name for i in g.input if i.name not in init_names]
        self.output_names = [o.name for o in g.output]
        self._consts, self._nodes, self._ops = consts, nodes, IMPORT_OPS

    def extra_repr(self):
        return (f"{self.source}: {len(self._nodes)} nodes, inputs {self.input_names}, "
                f"outputs {self.output_names}")

    def _environment(self, inputs):
        if len(inputs) != len(self.input_names):
            raise TypeError(f"OnnxModule: the model takes {len(self.input_names)} inputs "
                            f"({', '.join(self.input_names)}), got {len(inputs)}")
        env = dict(self._consts)
        for onnx_name, (kind, attr) in self._slots.items():
            env[onnx_name] = getattr(self, attr)
        for name, x in zip(self.input_names, inputs):
            env[name] = x if isinstance(x, Variable) else np.asarray(x)
        env[""] = None
        return env

    def forward(self, *inputs):
        results = self._run(self._nodes, self._environment(inputs), self.output_names)
        results = [r if isinstance(r, Variable) else Variable(_as_array(r), requires_grad=False)
                   for r in results]
        return results[0] if len(results) == 1 else tuple(results)

    def _run(self, nodes, env, output_names):
        """Interpret ``nodes`` over the values ``env`` (extended in place); the values
        named ``output_names``."""
        for node in nodes:
            args = [env.get(i) if i else None for i in node.inputs]
            try:
                outs = self._ops[node.op](node, args, _Scope(self, env) if node.scoped
                                          else self)
            except OnnxImportError:
                raise
            except (TypeError, ValueError, IndexError, KeyError, AttributeError,
                    ZeroDivisionError, OverflowError, RecursionError) as e:
                raise OnnxImportError(f"OnnxModule {self.source!r}: {node.where()} failed: "
                                      f"{type(e).__name__}: {str(e)[:300]}") from e
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            for name, value in zip(node.outputs, outs):
                if name:            # NumPy scalars (0-D results) as 0-D arrays
                    env[name] = np.asarray(value) if isinstance(value, np.generic) else value
        return [env[n] for n in output_names]


def load(path):
    """Read the ONNX file ``path``; returns an ``OnnxModule`` (in eval mode).  A file
    that is not a valid, supported ONNX model is an ``OnnxImportError`` naming it."""
    path = os.fspath(path)
    return build(_read(path), path, "onnx.load")


def build(proto, source, caller):
    """An ``OnnxModule`` of the checked ``proto`` in eval mode; whatever else a malformed
    model raises while it is built becomes an ``OnnxImportError`` naming ``source``."""
    try:
        module = OnnxModule(proto, source=source)
    except OnnxImportError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError,
            RecursionError, UnicodeError) as e:
        raise OnnxImportError(f"{caller}: {source!r} is malformed ({type(e).__name__}: "
                              f"{str(e)[:300]})") from None
    return module.eval()


def _as_array(r):
    """A graph output that is not a Variable: a device array as it is, else NumPy's."""
    return r if isinstance(r, cuda.array_types()) else np.asarray(r)
