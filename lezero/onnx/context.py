"""The state an export builds up: ONNX nodes, initializers, names, dynamic-axis facts.

Mapping rules (``lezero.onnx.ops_*``) talk to the exporter only through this object:
``ctx.ins(node)`` / ``ctx.outs(node)`` name a node's tensors, ``ctx.emit(op, inputs,
...)`` adds an ONNX node, ``ctx.const(array)`` an initializer, ``ctx.attr_tensor(node,
key)`` turns an array attribute (a constant, or a ``ValueRef`` to a graph value) into a
tensor name.  With ``dynamic_axes`` the graph was traced twice (the second time with the
dynamic axes one larger); ``ctx.shapes(name)`` gives a value's shape in both traces and
``ctx.dynamic_attrs(node)`` the attributes that differ, which a rule must ``claim`` (or
the export fails naming the node).
"""
import numpy as np

from lezero import cuda
from lezero.jit.ir import ValueRef

__all__ = ["ExportError", "ExportContext"]


class ExportError(ValueError):
    """A graph cannot be written as ONNX; the message names the node and operator."""


class ExportContext:
    def __init__(self, graph, opset, other=None, dyn=None):
        from lezero.onnx._deps import onnx
        self.onnx, self.helper = onnx(), onnx().helper
        self.g, self.opset, self.other = graph, opset, other
        self.dyn = dyn or {}
        self.nodes, self.initializers = [], {}
        self.names, self.aliases = {}, {}
        self.producers = graph.producers()
        self.index, self.node = None, None
        self._uid, self._const_ids, self._claimed = 0, {}, set()

    # ----- names ---------------------------------------------------------------------
    def fresh(self, hint="t"):
        self._uid += 1
        return f"{hint}_{self._uid}"

    def name(self, value):
        return self.names.get(value, value)

    def ins(self, node):
        return [self.name(n) for n in node.inputs]

    def outs(self, node):
        return list(node.outputs)

    def shape(self, value):
        return self.g.values[value].shape

    def dtype(self, value):
        return self.g.values[value].dtype

    def shapes(self, value):
        """(shape in the first trace, shape in the second) -- equal without dynamic axes."""
        second = self.other.values[value].shape if self.other is not None else None
        return self.shape(value), second if second is not None else self.shape(value)

    # ----- tensors -------------------------------------------------------------------
    def const(self, array, hint="const"):
        """An initializer holding ``array`` (equal small arrays share one)."""
        array = np.asarray(cuda.as_numpy(array))
        key = None
        if array.nbytes <= 4096:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._const_ids:
                return self._const_ids[key]
        name = self.fresh(hint)
        self.initializers[name] = array
        if key is not None:
            self._const_ids[key] = name
        return name

    def ints(self, values):
        return self.const(np.asarray(values, dtype=np.int64), "ints")

    def scalar(self, value, dtype):
        return self.const(np.asarray(value, dtype=dtype), "scalar")

    def attr_tensor(self, node, key, dtype=None):
        """A tensor name for an array attribute of ``node`` (bound value or constant)."""
        value = node.attrs[key]
        if isinstance(value, ValueRef):
            self.claim(node, key)
            name = self.name(value.name)
            if dtype is not None and self.g.values[value.name].dtype != np.dtype(dtype):
                name = self.emit("Cast", [name], to=self.tensor_type(dtype))
            return name
        array = np.asarray(cuda.as_numpy(value))
        return self.const(array if dtype is None else array.astype(dtype), key)

    def tensor_type(self, dtype):
        return self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    # ----- nodes ---------------------------------------------------------------------
    def emit(self, op_type, inputs, outputs=None, n_out=1, domain="", **attrs):
        """Add an ONNX node; returns its output name (or the list when n_out > 1)."""
        if outputs is None:
            outputs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        label = f"n{self.index}_{op_type}_{self._uid}" if self.index is not None else None
        self._uid += 1
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.helper.make_node(op_type, list(inputs), list(outputs),
                                                name=label, domain=domain or None, **attrs))
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def fail(self, node, why):
        raise ExportError(f"onnx.export: node {self.index} ({node.op}) cannot be exported: "
                          f"{why}")

    # ----- dynamic axes --------------------------------------------------------------
    def dynamic_attrs(self, node):
        return self.dyn.get(self.index, {}).get("attrs", set())

    def dynamic_consts(self, node):
        return self.dyn.get(self.index, {}).get("consts", set())

    def claim(self, node, key):
        self._claimed.add((self.index, key))

    def unclaimed(self, node):
        keys = set(self.dynamic_attrs(node)) | {f"input {i}" for i in self.dynamic_consts(node)}
        return sorted(k for k in keys if (self.index, k) not in self._claimed)

    def input_dim(self, size_a, size_b):
        """A scalar int64 tensor holding the run-time size of the graph input axis whose
        size is ``size_a`` in the first trace and ``size_b`` in the second (None when no
        dynamic input axis matches)."""
        for value in self.g.inputs:
            a, b = self.shapes(value)
            for axis, (n, m) in enumerate(zip(a, b)):
                if n == size_a and m == size_b and n != m:
                    shape = self.emit("Shape", [self.name(value)])
                    return self.emit("Gather", [shape, self.const(np.asarray(axis, np.int64))],
                                     axis=0)
        return None

    def run_time_shape(self, shape_a, shape_b):
        """An int64 shape tensor that is ``shape_a`` in the first trace and ``shape_b`` in
        the second: static dims written out, each changed dim read from the graph input
        axis that changed alike (None when one has no such axis)."""
        if len(shape_a) != len(shape_b):
            return None
        dims = []
        for n, m in zip(shape_a, shape_b):
            if n == m:
                dims.append(self.ints([n]))
                continue
            size = self.input_dim(n, m)
            if size is None:
                return None
            dims.append(self.emit("Unsqueeze", [size, self.ints([0])]))
        return self.emit("Concat", dims, axis=0)

    def fill_tensor(self, array_a, array_b):
        """A constant filled with one value in both traces (``zeros_like(ids)``, a zero
        initial state) whose shape follows dynamic input axes, as Expand(value, shape) on
        the run-time shape; None when it is not such a constant."""
        a, b = (np.asarray(cuda.as_numpy(v)) for v in (array_a, array_b))
        if a.size == 0 or b.size == 0 or a.dtype != b.dtype:
            return None
        first = a.reshape(-1)[0]
        if not (np.all(a == first) and np.all(b == first)):
            return None
        shape = self.run_time_shape(a.shape, b.shape)
        if shape is None:
            return None
        return self.emit("Expand", [self.const(np.asarray(first, a.dtype), "fill"), shape])

    def other_attr(self, node, key):
        """The attribute's value in the second trace."""
        return self.other.nodes[self.index].attrs[key]

    def int_list(self, values):
        return [int(v) for v in values]

    def axes_input_or_attr(self, op_type, x, axes, since, keepdims=None, outputs=None):
        """Reductions moved ``axes`` from an attribute to an input at opset ``since``."""
        extra = {} if keepdims is None else {"keepdims": int(keepdims)}
        if axes is None:
            return self.emit(op_type, [x], outputs, **extra)
        if self.opset >= since:
            return self.emit(op_type, [x, self.ints(axes)], outputs, **extra)
        return self.emit(op_type, [x], outputs, axes=self.int_list(axes), **extra)
