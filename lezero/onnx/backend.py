"""``lezero.onnx.backend``: LeZero as an ONNX backend (``onnx.backend.base.Backend``).

    import lezero.onnx.backend as backend
    rep = backend.prepare(model_proto)          # or a path, or serialized bytes
    y, = rep.run([x])                           # NumPy arrays, in the graph's output order
    backend.run_node(node_proto, [x])           # one operator, built into a model on the fly

This is the interface ``onnx.backend.test.BackendTest`` drives (``tests/onnx/
test_backend_suite.py``).  The graph runs through ``lezero.onnx.importer.OnnxModule``
(the interpreter behind ``lezero.onnx.load``).  What the model declares is enforced, so
that nothing comes back silently different: a graph input or output of a type LeZero has
no arrays for, an input array of another dtype than declared, or an output whose dtype or
static shape differs from the declaration is an ``OnnxImportError`` naming it.
Importing this module imports ``onnx`` (``import lezero`` does not).
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable, no_grad
from lezero.onnx._deps import onnx as _onnx_package
from lezero.onnx.import_checks import TENSOR_TYPES
from lezero.onnx.importer import OnnxImportError, build

_onnx = _onnx_package()
from onnx.backend.base import Backend, BackendRep, Device, DeviceType  # noqa: E402

__all__ = ["LeZeroBackend", "LeZeroRep", "prepare", "run_model", "run_node",
           "supports_device", "is_compatible"]


def _type_name(elem_type):
    return _onnx.TensorProto.DataType.Name(elem_type)


def _tensor_type(value_info, where):
    """(elem_type, static dims or None per axis) of a graph input/output ((0, None) when
    untyped), or an error for a value that is not a tensor (sequences, maps, optionals)."""
    kind = value_info.type.WhichOneof("value")
    if kind is None:                    # declared by name only (run_node's outputs)
        return 0, None
    if kind != "tensor_type":
        raise OnnxImportError(f"{where} {value_info.name!r} is a {kind or 'untyped value'}; "
                              "LeZero runs tensors only")
    t = value_info.type.tensor_type
    if t.elem_type and t.elem_type not in TENSOR_TYPES:
        raise OnnxImportError(f"{where} {value_info.name!r} has type "
                              f"{_type_name(t.elem_type)}, which LeZero does not support "
                              "(it runs booleans, integers and floats)")
    dims = None
    if t.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return t.elem_type, dims


def _np_dtype(elem_type):
    return np.dtype(_onnx.helper.tensor_dtype_to_np_dtype(elem_type))


class LeZeroRep(BackendRep):
    """A prepared model: ``run(inputs)`` -> tuple of NumPy arrays, one per graph output."""

    def __init__(self, model, module, device="CPU", check=True):
        super().__init__()
        self.check = check          # False: return what LeZero computed, unchecked
        g = model.graph
        initializers = {i.name for i in g.initializer}
        self.module, self.device = module, device
        self.inputs = [(vi.name, _tensor_type(vi, "graph input"))
                       for vi in g.input if vi.name not in initializers]
        self.outputs = [(vi.name, _tensor_type(vi, "graph output")) for vi in g.output]
        self._producer = {o: f"node {k} {n.name or n.op_type!r} ({n.op_type})"
                          for k, n in enumerate(g.node) for o in n.output}

    def _feeds(self, inputs):
        if isinstance(inputs, dict):
            missing = [n for n, _ in self.inputs if n not in inputs]
            if missing:
                raise TypeError(f"LeZeroRep.run: no value for input {missing[0]!r}")
            inputs = [inputs[n] for n, _ in self.inputs]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        if len(inputs) != len(self.inputs):
            raise TypeError(f"LeZeroRep.run: the model takes {len(self.inputs)} inputs "
                            f"({', '.join(n for n, _ in self.inputs)}), got {len(inputs)}")
        feeds = []
        for (name, (elem_type, _)), x in zip(self.inputs, inputs):
            x = np.asarray(x)
            if elem_type and x.dtype != _np_dtype(elem_type):
                raise TypeError(f"LeZeroRep.run: input {name!r} is declared "
                                f"{_type_name(elem_type)}, got an array of dtype {x.dtype}")
            if self.device.startswith("CUDA"):      # the interpreter keeps GPU data in Variables
                x = Variable(cuda.as_cupy(x), requires_grad=False)
            feeds.append(x)
        return feeds

    def _checked(self, name, declared, value):
        out = cuda.as_numpy(value.data if isinstance(value, Variable) else value)
        out = np.asarray(out)
        elem_type, dims = declared if self.check else (0, None)
        where = f"LeZero's {self._producer.get(name, 'graph')} output {name!r}"
        if elem_type and out.dtype != _np_dtype(elem_type):
            raise OnnxImportError(f"{where} has dtype {out.dtype}; the model declares "
                                  f"{_type_name(elem_type)}")
        if dims is not None and (len(dims) != out.ndim or any(
                d is not None and d != s for d, s in zip(dims, out.shape))):
            raise OnnxImportError(f"{where} has shape {out.shape}; the model declares "
                                  f"({', '.join('?' if d is None else str(d) for d in dims)})")
        return out

    def run(self, inputs, **kwargs):
        """The graph's outputs for ``inputs`` (a list in graph-input order, a dict by
        name, or one array), as NumPy arrays of the declared dtypes and shapes."""
        with no_grad():
            results = self.module(*self._feeds(inputs))
        results = results if isinstance(results, tuple) else (results,)
        return tuple(self._checked(name, declared, value)
                     for (name, declared), value in zip(self.outputs, results))


def _model_proto(model):
    if isinstance(model, _onnx.ModelProto):
        return model, model.graph.name or "<model>"
    if isinstance(model, (bytes, bytearray)):
        return _onnx.load_model_from_string(bytes(model)), "<bytes>"
    from lezero.onnx.import_checks import read_model
    return read_model(str(model), str(model)), str(model)


class LeZeroBackend(Backend):
    """``onnx.backend.base.Backend`` over ``OnnxModule``: CPU always, CUDA with CuPy."""

    @classmethod
    def supports_device(cls, device):
        try:
            kind = Device(device).type
        except (AttributeError, ValueError):
            return False
        return kind == DeviceType.CPU or (kind == DeviceType.CUDA and cuda.is_available())

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        if not cls.supports_device(device):
            raise ValueError(f"lezero.onnx.backend.prepare: device {device!r} is not "
                             "available (CPU, or CUDA where CuPy sees a GPU)")
        proto, source = _model_proto(model)
        module = build(proto, source, "lezero.onnx.backend.prepare")
        if device.startswith("CUDA"):
            module.to_gpu(Device(device).device_id)
        return LeZeroRep(proto, module, device, check=kwargs.get("check", True))

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """Run one ``NodeProto`` on ``inputs`` (arrays, in the node's input order)."""
        model = _node_model(node, inputs, outputs_info, kwargs.get("opset_version"))
        return cls.prepare(model, device).run([x for x in inputs if x is not None])


def _node_model(node, inputs, outputs_info, opset_version):
    """A one-node ModelProto whose inputs are typed after ``inputs``."""
    helper = _onnx.helper
    named = [n for n in node.input if n]
    arrays = [np.asarray(x) for x in inputs if x is not None]
    if len(named) != len(arrays):
        raise TypeError(f"lezero.onnx.backend.run_node: {node.op_type} names {len(named)} "
                        f"inputs, got {len(arrays)} arrays")
    graph_inputs = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(named, arrays)]
    graph_outputs = []
    for k, name in enumerate(node.output):
        if outputs_info is not None and k < len(outputs_info):
            dtype, shape = outputs_info[k]
            graph_outputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
        elif name:
            graph_outputs.append(_onnx.ValueInfoProto(name=name))
    graph = helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs,
                              graph_outputs)
    opset = opset_version or _onnx.defs.onnx_opset_version()
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


prepare = LeZeroBackend.prepare
run_model = LeZeroBackend.run_model
run_node = LeZeroBackend.run_node
supports_device = LeZeroBackend.supports_device
is_compatible = LeZeroBackend.is_compatible
