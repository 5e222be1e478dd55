"""The traces an export compares: what depends on a dynamic axis, what depends on a value.

A trace records one run; what it cannot see it freezes into constants.  The exporter
therefore traces the model more than once and compares the graphs:

* **Dynamic axes.**  A second trace with every dynamic axis grown (axes named alike grow
  alike, the k-th distinct name by k + 1, so that no two names share a pair of sizes)
  shows which attributes and constants follow those sizes.  A model that runs other
  operators at the example size than at the grown one (a broadcast that is a no-op at
  batch 1) is traced at the grown size and at one grown twice instead.
* **Input values.**  A trace on the same shapes with other values (floats scaled and
  shifted, integers ``(x + 1) % (max + 1)``, booleans negated) must give the same
  constants and attributes; one that differs was computed from an input outside LeZero
  operators (NumPy on ``.data``) and the file would hold this run's value, so the export
  is refused naming the node and the input.
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.jit import attrs as A
from lezero.jit.checks import GRADIENT_ONLY, changed_params
from lezero.onnx.context import ExportError

__all__ = ["trace_graph", "trace_dynamic", "check_value_dependence", "perturbed"]

# Attributes that only scale a gradient (the forward and so the file never read them).


def _data(a):
    return cuda.as_numpy(a.data if isinstance(a, Variable) else a)


def trace_graph(model, args):
    """(graph, the function traced): a Module or function traced once (dead code removed);
    a loaded StaticGraph gives the graph it holds.  ``jit.trace``'s own value check is
    left to ``check_value_dependence``, which also changes uniform integer inputs (an
    all-ones mask) and ignores attributes that only scale a gradient."""
    from lezero.jit import trace
    from lezero.jit.passes import dce
    from lezero.jit.static_graph import StaticGraph
    if isinstance(model, StaticGraph):
        if model._fn is None:          # a loaded graph: export what it holds
            g = model.graph.copy()
            g.nodes = [s for n in g.nodes for s in (n.sub if n.sub is not None else [n])]
            return g, model
        model = model._fn
    return dce(trace(model, *args, optimize=False, check_trace=False).graph), model


def grown(args, input_names, dyn, times=1):
    """The inputs with every dynamic axis longer: the k-th distinct dimension name by
    ``times * (k + 1)`` (the first entries repeated)."""
    order = {}
    for name in input_names:
        for axis in sorted(dyn.get(name, {})):
            order.setdefault(dyn[name][axis], len(order) + 1)
    out = []
    for name, a in zip(input_names, args):
        x = np.asarray(_data(a))
        for axis in sorted(dyn.get(name, {})):
            extra = times * order[dyn[name][axis]]
            x = np.concatenate([x, np.take(x, [0] * extra, axis=axis)], axis=axis)
        out.append(x)
    return out


def _differences(g1, g2, skip=frozenset()):
    """{node index: {"attrs": keys, "consts": input positions}} that differ between two
    graphs of the same operators (but the (op, key) pairs in ``skip``); None when the
    operators differ."""
    if [n.op for n in g1.nodes] != [n.op for n in g2.nodes]:
        return None
    info = {}
    for k, (a, b) in enumerate(zip(g1.nodes, g2.nodes)):
        attrs = {key for key in a.attrs if not key.startswith("_")
                 and (a.op, key) not in skip and not A.attrs_equal(a.attrs[key], b.attrs.get(key))}
        consts = {i for i, (x, y) in enumerate(zip(a.inputs, b.inputs))
                  if g1.values[x].kind == "const" and (
                      g2.values[y].kind != "const"
                      or not A.attrs_equal(g1.consts[x], g2.consts[y]))}
        if attrs or consts:
            info[k] = {"attrs": attrs, "consts": consts}
    for k, (a, b) in enumerate(zip(g1.outputs, g2.outputs)):
        if g1.values[a].kind == "const" and not (
                g2.values[b].kind == "const" and A.attrs_equal(g1.consts[a], g2.consts[b])):
            info[("output", k)] = {"attrs": set(), "consts": set()}
    return info


def _trace_grown(fn, args):
    try:
        return trace_graph(fn, args)[0]
    except (TypeError, ValueError) as e:
        raise ExportError(f"onnx.export: the model fails on inputs longer along the "
                          f"dynamic axes (shapes {[a.shape for a in args]}): {e}") from e


def trace_dynamic(graph, fn, args, input_names, dyn):
    """(graph to write, second graph, differences, input sets to validate) for an export
    with dynamic input axes (see the module docstring)."""
    once = grown(args, input_names, dyn)
    other = _trace_grown(fn, once)
    info = _differences(graph, other)
    if info is not None:
        return graph, other, info, [list(args), once]
    twice = grown(args, input_names, dyn, times=2)
    third = _trace_grown(fn, twice)
    info = _differences(other, third)
    if info is None:
        raise ExportError("onnx.export: the model runs different operators when a dynamic "
                          "axis changes size (its Python code depends on the shape), so no "
                          "single ONNX graph represents it; export without that dynamic axis")
    return other, third, info, [list(args), once, twice]


def perturbed(a):
    """An input of the same shape and dtype with other values (see the module docstring)."""
    x = np.asarray(_data(a))
    if x.dtype == np.bool_:
        return ~x
    if x.dtype.kind in "iu":
        if x.size == 0:
            return x.copy()
        top = int(x.max())
        return ((x.astype(np.int64) + 1) % (top + 1)).astype(x.dtype) if top > 0 else x.copy()
    if x.dtype.kind == "f":
        return (x * 0.5 + 0.25).astype(x.dtype)
    return x.copy()


def _dependent(graph, fn, args, which):
    """The differences between ``graph`` and a trace with the inputs ``which`` perturbed
    (None: the operators differ)."""
    changed = [perturbed(a) if k in which else a for k, a in enumerate(args)]
    try:
        other = trace_graph(fn, changed)[0]
    except (TypeError, ValueError) as e:
        raise ExportError(f"onnx.export: the model fails when the values of its inputs "
                          f"change ({e}); the export cannot check that no input value is "
                          "frozen into the file") from e
    info = _differences(graph, other, GRADIENT_ONLY)
    if info is not None:        # a Variable made in the call from an input's values
        for name in changed_params(graph, other):
            info[("param", name)] = {"attrs": set(), "consts": set()}
    return info


def check_value_dependence(graph, fn, args, input_names):
    """Raise ``ExportError`` when a constant or attribute of ``graph`` was computed from an
    input's values outside LeZero operators (or the operators depend on the values)."""
    all_inputs = set(range(len(args)))
    info = _dependent(graph, fn, args, all_inputs)
    if info == {}:
        return
    culprits = [input_names[k] for k in sorted(all_inputs)
                if len(all_inputs) == 1 or _dependent(graph, fn, args, {k}) != {}]
    named = ", ".join(repr(c) for c in culprits) or "the inputs"
    if info is None:
        raise ExportError(f"onnx.export: the model runs different operators for other "
                          f"values of {named} (Python code branches on the values), so no "
                          "single ONNX graph represents it")
    nodes = sorted(k for k in info if isinstance(k, int))
    params = [k[1] for k in info if isinstance(k, tuple) and k[0] == "param"]
    if params and not nodes:
        where = f"the Variable %{params[0]} (made during the call, so written as a weight)"
    elif nodes:
        k = nodes[0]
        what = sorted(f"attribute {key!r}" for key in info[k]["attrs"])
        what += [f"input {i}" for i in sorted(info[k]["consts"])]
        where = f"node {k} ({graph.nodes[k].op}): {', '.join(what)}"
    else:
        where = f"output {min(k for k in info if k[0] != 'param')[1]}"
    raise ExportError(f"onnx.export: {where} was computed "
                      f"from the values of {named} outside LeZero operators (NumPy on "
                      "`.data`), so the trace holds it as a constant and the ONNX file "
                      "would not follow that input; compute it with LeZero operators")
