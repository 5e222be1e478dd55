"""``onnx.export``: a traced LeZero graph written as an ONNX model, checked and validated.

1. The model (in eval mode, as PyTorch exports) is traced with ``jit.trace``, and traced
   again with other input values: a constant or attribute that changes was computed from
   an input outside LeZero operators and is refused (``export_trace``), never frozen.
   With ``dynamic_axes`` it is traced with the dynamic axes grown; what differs between
   those graphs is what depends on the sizes.
2. Each node is written by the rule its Function class has in ``registry.RULES``; a node
   without one, or needing a higher opset, is an ``ExportError`` naming it.
3. The model passes ``onnx.checker.check_model(full_check=True)`` and is written with
   ``atomic_write``.
4. onnxruntime (or OpenVINO, ``check=``) runs it on the example inputs (and on the grown
   ones with dynamic axes); the largest absolute difference per output against eager
   LeZero is returned in an ``ExportReport`` (and a difference beyond the tolerance raises).
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable, no_grad
from lezero.onnx._deps import onnx as _onnx
from lezero.onnx.context import ExportContext, ExportError
from lezero.onnx.export_trace import check_value_dependence, trace_dynamic, trace_graph
from lezero.onnx.registry import load_rules
from lezero.onnx.validate import ExportReport, check_runtimes, validate_model
from lezero.utils.checks import check_int, check_type
from lezero.utils.files import atomic_write

__all__ = ["export", "export_bytes", "ExportError", "build_model"]

MIN_OPSET, MAX_OPSET = 14, 21


def _as_args(args):
    if isinstance(args, (tuple, list)):
        return tuple(args)
    return (args,)


def _names(given, n, prefix, what):
    if given is None:
        return [f"{prefix}_{k}" for k in range(n)]
    given = list(given)
    if len(given) != n or not all(isinstance(s, str) and s for s in given):
        raise ValueError(f"onnx.export: {what} must be {n} non-empty strings, got {given!r}")
    if len(set(given)) != n:
        raise ValueError(f"onnx.export: {what} must be distinct, got {given!r}")
    return given


def _parse_dynamic_axes(dynamic_axes, input_names, output_names, args):
    """{name: {axis: dim name}} from PyTorch's forms ({name: [axes]} or {name: {axis:
    name}}), checked against the names and the inputs' ranks."""
    if dynamic_axes is None:
        return {}
    check_type("onnx.export", "dynamic_axes", dynamic_axes, dict, "a dict")
    out = {}
    known = set(input_names) | set(output_names)
    for name, axes in dynamic_axes.items():
        if name not in known:
            raise ValueError(f"onnx.export: dynamic_axes names {name!r}, which is neither an "
                             f"input ({input_names}) nor an output ({output_names})")
        if isinstance(axes, dict):
            table = {int(a): str(d) for a, d in axes.items()}
        elif isinstance(axes, (list, tuple)):
            table = {int(a): f"{name}_dim{int(a)}" for a in axes}
        else:
            raise TypeError(f"onnx.export: dynamic_axes[{name!r}] must be a list of axes or "
                            f"a dict axis -> name, got {type(axes).__name__}")
        if name in input_names:
            ndim = np.ndim(_data(args[input_names.index(name)]))
            bad = [a for a in table if not 0 <= a < ndim]
            if bad:
                raise ValueError(f"onnx.export: dynamic axis {bad[0]} of input {name!r} is out "
                                 f"of range for {ndim} dimensions")
        out[name] = table
    return out


def _data(a):
    return a.data if isinstance(a, Variable) else a


def _emit_nodes(ctx, opset):
    rules = load_rules()
    for k, node in enumerate(ctx.g.nodes):
        ctx.index, ctx.node = k, node
        rule = rules.get(node.op)
        if rule is None:
            raise ExportError(f"onnx.export: node {k} ({node.op}) has no ONNX mapping; "
                              f"{len(rules)} Function classes have one (see docs/onnx.md or "
                              "lezero.onnx.coverage())")
        if rule.opset > opset:
            raise ExportError(f"onnx.export: node {k} ({node.op}) needs opset_version >= "
                              f"{rule.opset}, got {opset}")
        rule.fn(ctx, node)
        left = ctx.unclaimed(node)
        if left:
            raise ExportError(f"onnx.export: node {k} ({node.op}): {', '.join(left)} depend on "
                              "the size of a dynamic axis, which this operator's ONNX form "
                              "cannot follow; export without that dynamic axis")


def _value_info(ctx, value, name, dims_a, dims_b, dyn_names):
    dims = []
    for axis, (a, b) in enumerate(zip(dims_a, dims_b)):
        if a != b or axis in dyn_names:
            dims.append(dyn_names.get(axis, f"{name}_dim{axis}"))
        else:
            dims.append(int(a))
    return ctx.helper.make_tensor_value_info(name, ctx.tensor_type(ctx.dtype(value)), dims)


def build_model(graph, opset, input_names, output_names, dyn, other=None, dyn_info=None):
    """The ONNX ModelProto of ``graph`` (see the module docstring)."""
    onnx = _onnx()
    ctx = ExportContext(graph, opset, other, dyn_info)
    for value, name in zip(graph.inputs, input_names):
        ctx.names[value] = name
    _emit_nodes(ctx, opset)
    for value, name in zip(graph.outputs, output_names):
        ctx.emit("Identity", [ctx.name(value)], [name])
    used = {i for n in ctx.nodes for i in n.input}
    inits = [onnx.numpy_helper.from_array(np.asarray(cuda.as_numpy(p.data)), name)
             for name, p in graph.params.items() if name in used]
    inits += [onnx.numpy_helper.from_array(np.asarray(cuda.as_numpy(c)), name)
              for name, c in graph.consts.items() if name in used]
    inits += [onnx.numpy_helper.from_array(a, name) for name, a in ctx.initializers.items()
              if name in used]
    shapes = (lambda v: ctx.shapes(v))
    inputs = [_value_info(ctx, v, n, *shapes(v), dyn.get(n, {}))
              for v, n in zip(graph.inputs, input_names)]
    outputs = [_value_info(ctx, v, n, *shapes(v), dyn.get(n, {}))
               for v, n in zip(graph.outputs, output_names)]
    g = ctx.helper.make_graph(ctx.nodes, "lezero", inputs, outputs, inits)
    model = ctx.helper.make_model(g, opset_imports=[ctx.helper.make_opsetid("", opset)],
                                  producer_name="lezero")
    model.ir_version = min(model.ir_version, 10)
    return model


def export(model, args, path, opset_version=17, input_names=None, output_names=None,
           dynamic_axes=None, validate=True, rtol=1e-3, atol=1e-4, check="onnxruntime"):
    """Export ``model(*args)`` to the ONNX file ``path``; returns an ``ExportReport``.

    ``model``: a Module (exported in eval mode, its mode restored after), a function, or
    a StaticGraph.  ``args``: the example input (or a tuple of them).  ``dynamic_axes``:
    PyTorch's form, ``{"input_0": {0: "batch"}, "output_0": {0: "batch"}}`` or lists of
    axes.  ``validate``: run the file and compare with LeZero (``rtol``/``atol``) on the
    runtimes ``check`` names: "onnxruntime" (default), "openvino" (its CPU plugin), a
    list of both, or None.
    The file is written (atomically) only once the model passed the checker and, with
    ``validate``, onnxruntime agreed."""
    data, report = export_bytes(model, args, opset_version, input_names, output_names,
                                dynamic_axes, validate, rtol, atol, check)
    atomic_write(path, data, where="onnx.export")
    report.path = path
    return report


def export_bytes(model, args, opset_version=17, input_names=None, output_names=None,
                 dynamic_axes=None, validate=True, rtol=1e-3, atol=1e-4, check="onnxruntime"):
    """``export`` without the file: (serialized model, ExportReport)."""
    onnx = _onnx()
    runtimes = check_runtimes(check) if validate else ()
    opset = check_int("onnx.export", "opset_version", opset_version, MIN_OPSET, MAX_OPSET)
    args = _as_args(args)
    for a in args:
        if not (isinstance(a, Variable) or isinstance(a, cuda.array_types())):
            raise TypeError(f"onnx.export: every example input must be an array or Variable, "
                            f"got {type(a).__name__}")
    was_training = getattr(model, "training", None)
    if was_training:
        model.eval()
    try:
        graph, fn = trace_graph(model, args)
        in_names = _names(input_names, len(graph.inputs), "input", "input_names")
        out_names = _names(output_names, len(graph.outputs), "output", "output_names")
        dyn = _parse_dynamic_axes(dynamic_axes, in_names, out_names, args)
        if getattr(fn, "_fn", True) is not None:
            check_value_dependence(graph, fn, args, in_names)
        other, info, cases = None, {}, [list(args)]
        if any(name in in_names for name in dyn):
            if getattr(fn, "_fn", True) is None:
                raise ExportError("onnx.export: a loaded StaticGraph holds one input shape; "
                                  "dynamic axes need the function or Module it was traced "
                                  "from (export that instead)")
            graph, other, info, cases = trace_dynamic(graph, fn, args, in_names, dyn)
        proto = build_model(graph, opset, in_names, out_names, dyn, other, info)
        onnx.checker.check_model(proto, full_check=True)
        data = proto.SerializeToString()
        report = ExportReport(None, opset, in_names, out_names, proto)
        if runtimes:
            with no_grad():
                validate_model(data, fn, cases, in_names, out_names, report, rtol, atol,
                               runtimes)
    finally:
        if was_training:
            model.train()
    return data, report
