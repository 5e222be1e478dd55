"""Record one run of a function or Module as a ``Graph``.

The run is ordinary eager LeZero code.  A ``FunctionHook`` sees every Function called, in
order, and copies its constructor attributes before ``forward`` runs; afterwards the
graph is read off the Functions' own links (``inputs`` and the weak ``outputs``).  The
example inputs are given to ``fn`` as Variables that require gradients, so every
operation that depends on them is recorded; operations on constants alone are not, and
their results become constants of the graph.

A leaf Variable (one no recorded Function produced) is a graph input when it is an
example input or wraps the very same array, a parameter when it is a ``Parameter`` (or
any Variable that requires a gradient), and a constant otherwise.
"""
import contextlib
import os
import traceback
import warnings

from lezero import cuda
from lezero.core import FunctionHook, Parameter, Variable, get_config, using_config
from lezero.jit import attrs as A
from lezero.jit.errors import TraceError, TracerWarning
from lezero.jit.ir import Graph, Node, walk_refs

__all__ = ["Recording", "record", "flatten_outputs", "is_module", "is_tracing"]

_JIT_DIR = os.path.dirname(os.path.abspath(__file__))
_VALUE_READS = ("item", "__bool__", "__float__", "__int__")


def is_tracing():
    """True while ``jit.trace`` (or ``onnx.export``) records a run on this thread
    (``Config.tracing``): a layer whose eager form computes in NumPy (an MoE's routing)
    takes its operator form then, as ``torch.jit.is_tracing()`` lets PyTorch code do."""
    return get_config().tracing


def is_module(obj):
    from lezero.nn import Module
    return isinstance(obj, Module)


class _Call:
    """One Function call seen by the recorder: the instance (kept alive), its
    constructor attributes, its input arrays and (once run) its output arrays."""

    __slots__ = ("f", "attrs", "xs", "ys")

    def __init__(self, f, attrs, xs):
        self.f, self.attrs, self.xs, self.ys = f, attrs, list(xs), None


class _Recorder(FunctionHook):
    """Keeps every Function called, in order, as a ``_Call``."""

    def __init__(self):
        self.calls = []

    def forward_preprocess(self, function, in_data):
        call = _Call(function, A.snapshot(function), in_data)
        self.calls.append(call)
        forward = function.forward

        def noted(*xs):              # keep the outputs' arrays, even of dead code
            ys = forward(*xs)
            call.ys = list(ys) if isinstance(ys, tuple) else [ys]
            return ys
        function.forward = noted

    def forward_postprocess(self, function, in_data):
        function.__dict__.pop("forward", None)


def _caller_location():
    """file:line of the innermost frame outside lezero.jit and lezero.core."""
    core = os.path.join(os.path.dirname(_JIT_DIR), "core")
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = os.path.abspath(frame.filename)
        if not (path.startswith(_JIT_DIR) or path.startswith(core)):
            return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"


@contextlib.contextmanager
def _watch_value_reads(reads, live):
    """Report Python reads of a traced value (``.item()``, ``bool()``, ``float()``,
    ``int()``): code branching on them is frozen into the graph."""
    originals = {name: getattr(Variable, name) for name in _VALUE_READS}

    def wrap(name, method):
        def watched(self, *args):
            if self.creator is not None or id(self) in live:
                reads.append((name, _caller_location()))
            return method(self, *args)
        return watched

    for name, method in originals.items():
        setattr(Variable, name, wrap(name, method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(Variable, name, method)


def flatten_outputs(out, leaves):
    """A tree describing ``out`` (nested tuples, lists, dicts); its Variables are
    appended to ``leaves`` and referred to by position."""
    if isinstance(out, Variable):
        leaves.append(out)
        return ("var", len(leaves) - 1)
    if isinstance(out, (tuple, list)):
        return (type(out).__name__, [flatten_outputs(o, leaves) for o in out])
    if isinstance(out, dict):
        return ("dict", [(k, flatten_outputs(v, leaves)) for k, v in out.items()])
    return ("const", out)


class Recording:
    """What one traced run produced: the graph plus facts the checks need."""

    def __init__(self, graph, calls, reads, out_value):
        self.graph, self.calls, self.reads, self.out_value = graph, calls, reads, out_value


def record(fn, args, param_names=None):
    """Run ``fn(*args)`` once under the recorder; return a ``Recording``.

    ``args`` are the call's arguments: arrays and Variables become graph inputs, anything
    else is passed through unchanged (and guarded by the caller)."""
    traced, input_ids = [], {}
    for k, a in enumerate(args):
        if isinstance(a, Variable) or isinstance(a, cuda.array_types()):
            data = a.data if isinstance(a, Variable) else a
            v = Variable(data, name=f"x{k}")     # requires_grad: everything is recorded
            traced.append(v)
            input_ids[id(v)] = input_ids[id(data)] = f"x{k}"
        else:
            traced.append(a)
    recorder, reads = _Recorder(), []
    live = {i for i in input_ids}
    # every input stays a Variable: the graph is read back by identity once the run ends
    with using_config("enable_backprop", True), using_config("release_inputs", False), \
            using_config("tracing", True), recorder, _watch_value_reads(reads, live):
        out = fn(*traced)
    leaves = []
    tree = flatten_outputs(out, leaves)
    if not leaves:
        raise TraceError(f"jit.trace: {_name(fn)} returned {type(out).__name__}, which "
                         "holds no Variable; a static graph needs at least one Variable "
                         "output (return the result of LeZero operators)")
    graph = _build(recorder.calls, traced, input_ids, leaves, param_names or {})
    graph.out_tree = tree
    return Recording(graph, recorder.calls, reads, out)


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class _Builder:
    """Names the values of a recorded run and assembles the Graph."""

    def __init__(self, traced, input_ids, param_names):
        self.g = Graph()
        self.names = {}           # id(Variable) -> value name
        self.keep = {}            # value name -> Variable (keeps ids unique)
        self.arrays = {}          # id(array) -> value name (inputs and node outputs)
        self.const_ids = {}       # id(array) -> constant name
        self.alive = []
        self.input_ids, self.param_names = input_ids, param_names
        for a in traced:
            if isinstance(a, Variable):
                name = input_ids[id(a)]
                self.g.add_value(name, "input", a.shape, a.dtype)
                self.g.inputs.append(name)
                self._bind(name, a)

    def _bind(self, name, var):
        self.names[id(var)] = name
        self.keep[name] = var
        self.arrays.setdefault(id(var.data), name)

    def lookup(self, var):
        """(value name, detached): detached when ``var`` is a constant wrapping the
        array of a graph value (``constant(x.data)``): eager code cut the gradient there."""
        name = self.names.get(id(var))
        if name is not None and self.keep[name] is var:
            return name, False
        if not var.requires_grad:
            name = self.arrays.get(id(var.data))
            if name is not None:
                return name, True
        return self._leaf(var), False

    def _leaf(self, var):
        g = self.g
        if isinstance(var, Parameter) or var.requires_grad:
            base = self.param_names.get(id(var)) or var.name or "param"
            name = base if base not in g.values else g.new_name(base + ".")
            g.add_value(name, "param", var.shape, var.dtype)
            g.params[name] = var
        else:
            name = self.const_array(var.data)
        self.names[id(var)] = name
        self.keep.setdefault(name, var)
        return name

    def const_array(self, array):
        name = self.const_ids.get(id(array))
        if name is None:
            name = self.g.add_const(array)
            self.const_ids[id(array)] = name
            self.alive.append(array)
        return name

    def _outputs(self, call, variables):
        outs = []
        for k, y in enumerate(call.ys or []):
            name = self.g.new_name()
            var = variables[k] if k < len(variables) else None
            data = var.data if var is not None else y
            self.g.add_value(name, "node", getattr(data, "shape", ()),
                             getattr(data, "dtype", None) or "float32")
            if var is not None:
                self._bind(name, var)
            self.arrays.setdefault(id(y), name)
            self.alive.append(y)          # ids stay unique while the graph is built
            outs.append(name)
        return outs

    def add_call(self, call):
        """A recorded call (its graph links name the inputs)."""
        f = call.f
        looked = [self.lookup(x) for x in f.inputs]
        attrs = dict(call.attrs)
        detached = [k for k, (_, d) in enumerate(looked) if d]
        if detached:
            attrs["_detach"] = detached
        outs = self._outputs(call, [ref() for ref in f.outputs])
        self.g.nodes.append(Node(type(f).__name__, [n for n, _ in looked], outs, attrs,
                                 type(f)))

    def add_unrecorded(self, call):
        """A call on constants alone (a non-differentiable operator on ``x.data``, or a
        lookup in a constant table): a node when one of its input arrays, or an array it
        holds as an attribute (the traced indices of ``embedding``/``take``/``gather``),
        is a graph value; else constant folding."""
        if call.ys is None or not (any(id(x) in self.arrays for x in call.xs)
                                   or self._holds_value(call.attrs)):
            return
        ins = [self.arrays.get(id(x)) or self.const_array(x) for x in call.xs]
        attrs = dict(call.attrs, _nograd=True)
        outs = self._outputs(call, [])
        f = call.f
        self.g.nodes.append(Node(type(f).__name__, ins, outs, attrs, type(f)))

    def _holds_value(self, attrs):
        """True when an attribute holds (by identity) the array of a graph value."""
        return any(next(walk_refs(A.bind_values(v, self.arrays)), None) is not None
                   for k, v in attrs.items() if not k.startswith("_"))


def _build(calls, traced, input_ids, leaves, param_names):
    b = _Builder(traced, input_ids, param_names)
    for call in calls:
        if call.f.inputs:            # recorded: it depends on an input or a parameter
            b.add_call(call)
        else:
            b.add_unrecorded(call)
    g = b.g
    g.outputs = [b.lookup(v)[0] for v in leaves]
    # Attributes holding a graph value's array are bound to it (Embedding's indices).
    for node in g.nodes:
        node.attrs = {k: A.bind_values(v, b.arrays) if not k.startswith("_") else v
                      for k, v in node.attrs.items()}
    return g


def report_reads(reads, strict, fn):
    """Warn (or raise, when ``strict``) about values read in Python during the trace."""
    if not reads:
        return
    places = sorted({f"{what}() at {where}" for what, where in reads})
    text = (f"jit.trace: {_name(fn)} read the value of a traced Variable in Python "
            f"({'; '.join(places[:5])}{' ...' if len(places) > 5 else ''}); control flow or "
            "numbers computed from it are frozen into the graph and will not follow new "
            "inputs")
    if strict:
        raise TraceError(text)
    warnings.warn(text, TracerWarning, stacklevel=4)


def mode_of(fn):
    """(Config.train, module.training or None): the mode a graph is guarded on."""
    return (bool(get_config().train), fn.training if is_module(fn) else None)


def module_param_names(fn):
    if not is_module(fn):
        return {}
    names = {}
    for name, p in fn.named_parameters():
        names.setdefault(id(p), name)
    return names


