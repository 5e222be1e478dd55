"""``StaticGraph``: a traced function that replays, guarded, optionally verified.

    g = jit.trace(model, x)        # model.eval() first for inference
    y = g(x)                       # replay: same signature and outputs as model(x)

Each call checks the inputs against the trace (shapes, dtypes, array backend, the
non-array arguments, ``Config.train`` and ``module.training``).  On a mismatch it raises
a ``GuardError`` listing every difference, or, with ``retrace=True``, traces the
function again for the new signature (graphs are cached per signature).

When gradients are wanted (grad mode on and a parameter or an input Variable requires
one) the replay runs through the autograd engine so ``backward`` works; otherwise it runs
on raw arrays.  ``verify=N`` runs eager and static side by side for the next N calls and
keeps the largest difference in ``verify_report``.
"""
import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Parameter, Variable, get_config, no_grad
from lezero.random import get_rng_state, set_rng_state
from lezero.jit.errors import GuardError, VerifyError
from lezero.jit.executor import Program
from lezero.jit.tracer import flatten_outputs, is_module

__all__ = ["StaticGraph", "signature_of", "describe_mismatch"]

_MAX_CACHED = 8


def signature_of(args):
    """Per argument: ("array", shape, dtype, backend) or ("static", value)."""
    sig = []
    for a in args:
        data = a.data if isinstance(a, Variable) else a
        if isinstance(data, cuda.array_types()):
            sig.append(("array", tuple(data.shape), data.dtype.name, get_backend(data).name))
        else:
            sig.append(("static", a))
    return tuple(sig)


def _mode_text(mode):
    train, module = mode
    text = f"Config.train={train}"
    return text if module is None else text + f", module.training={module}"


def describe_mismatch(expected, got, mode_expected, mode_got):
    """Every difference between a call and the trace, as sentences (empty when none)."""
    diffs = []
    if len(expected) != len(got):
        diffs.append(f"it takes {len(expected)} arguments, got {len(got)}")
    for k, (e, g) in enumerate(zip(expected, got)):
        if e[0] != g[0]:
            what = {"array": "an array", "static": "a non-array value"}
            diffs.append(f"argument {k} was {what[e[0]]} when traced, got {what[g[0]]}")
        elif e[0] == "array":
            for label, i in (("shape", 1), ("dtype", 2), ("array backend", 3)):
                if e[i] != g[i]:
                    diffs.append(f"argument {k} has {label} {g[i]}, traced with {e[i]}")
        elif not _same_static(e[1], g[1]):
            diffs.append(f"argument {k} is {g[1]!r}, traced with {e[1]!r} (non-array "
                         "arguments are constants of the graph)")
    if mode_expected != mode_got:
        diffs.append(f"called with {_mode_text(mode_got)}, traced with "
                     f"{_mode_text(mode_expected)}")
    return diffs


def _same_static(a, b):
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return a is b


def _unflatten(tree, leaves):
    kind, body = tree
    if kind == "var":
        return leaves[body]
    if kind in ("tuple", "list"):
        items = [_unflatten(t, leaves) for t in body]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: _unflatten(t, leaves) for k, t in body}
    return body


class _Compiled:
    """One traced signature: the optimised graph and its two programs (built lazily)."""

    def __init__(self, graph, raw_graph, signature, mode):
        self.graph, self.raw_graph = graph, raw_graph
        self.signature, self.mode = signature, mode
        self._arrays = self._autograd = None

    @property
    def arrays(self):
        if self._arrays is None:
            self._arrays = Program(self.graph)
        return self._arrays

    @property
    def autograd(self):
        if self._autograd is None:
            self._autograd = Program(self.graph, expand_fused=True)
        return self._autograd


class StaticGraph:
    """A traced function or Module that replays its recorded graph (see module doc).

    Attributes: ``graph`` (the optimised IR, printable), ``raw_graph`` (as traced),
    ``verify_report`` (per verified call: the largest absolute difference)."""

    def __init__(self, graph, raw_graph, signature, mode, fn=None, retrace=None, verify=0,
                 rtol=1e-4, atol=1e-5, name="graph"):
        self._current = _Compiled(graph, raw_graph, signature, mode)
        self._cache = {self._key(signature, mode): self._current}
        self._fn, self._retrace = fn, retrace
        self.verify_left, self.rtol, self.atol = int(verify), rtol, atol
        self.verify_report = []
        self.name = name

    # ----- the current graph (the last signature called) --------------------------------
    graph = property(lambda self: self._current.graph, doc="the optimised graph")
    raw_graph = property(lambda self: self._current.raw_graph, doc="the graph as traced")
    signature = property(lambda self: self._current.signature, doc="the guarded inputs")
    mode = property(lambda self: self._current.mode, doc="(Config.train, module.training)")

    def __str__(self):
        return str(self.graph)

    def __repr__(self):
        return f"<StaticGraph {self.name}: {len(self.graph.nodes)} nodes>\n{self.graph}"

    def named_parameters(self):
        return list(self.graph.params.items())

    def parameters(self):
        return [p for _, p in self.named_parameters() if isinstance(p, Parameter)
                or p.requires_grad]

    # ----- calling ---------------------------------------------------------------------
    @staticmethod
    def _key(signature, mode):
        return repr((signature, mode))

    def _current_mode(self):
        module = self._fn.training if self._fn is not None and is_module(self._fn) else None
        if self._fn is None and self.mode[1] is not None:
            module = self.mode[1]            # a loaded graph has no module to consult
        return (bool(get_config().train), module)

    def _select(self, args):
        sig, mode = signature_of(args), self._current_mode()
        compiled = self._cache.get(self._key(sig, mode))
        if compiled is not None:
            return compiled
        diffs = describe_mismatch(self.signature, sig, self.mode, mode)
        if self._retrace is None or self._fn is None:
            hint = (" (pass retrace=True to jit.trace to trace again for new signatures)"
                    if self._fn is not None else "")
            raise GuardError(f"StaticGraph {self.name}: called with inputs it was not "
                             f"traced for: {'; '.join(diffs)}{hint}")
        compiled = self._retrace(args)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.pop(next(iter(self._cache)))
        self._cache[self._key(compiled.signature, compiled.mode)] = compiled
        return compiled

    def _wants_grad(self, args, graph):
        if not get_config().enable_backprop:
            return False
        return any(p.requires_grad for p in graph.params.values()) or any(
            isinstance(a, Variable) and a.requires_grad for a in args)

    def __call__(self, *args):
        compiled = self._select(args)
        self._current = compiled
        state = get_rng_state() if self.verify_left > 0 else None
        arrays = [a for a in args if isinstance(a, Variable)
                  or isinstance(a, cuda.array_types())]
        if self._wants_grad(args, compiled.graph):
            ins = [a if isinstance(a, Variable) else Variable(a, requires_grad=False)
                   for a in arrays]
            outs = compiled.autograd.run_variables(ins)
        else:
            outs = compiled.arrays.run_arrays([a.data if isinstance(a, Variable) else a
                                               for a in arrays])
            outs = [Variable(o, requires_grad=False) for o in outs]
        result = _unflatten(compiled.graph.out_tree, outs)
        if state is not None:
            self._verify(args, outs, state)
        return result

    def _verify(self, args, outs, state):
        """Run the eager function from the same random state; compare every output."""
        if self._fn is None:
            raise VerifyError("StaticGraph: verify needs the traced function (a loaded "
                              "graph has none)")
        after = get_rng_state()
        set_rng_state(state)
        wrapped = [Variable(a, requires_grad=False) if isinstance(a, cuda.array_types()) else a
                   for a in args]           # as traced: operators see Variables
        try:
            with no_grad():
                ref = self._fn(*wrapped)
        finally:
            set_rng_state(after)
        leaves = []
        flatten_outputs(ref, leaves)
        worst, bad = 0.0, []
        for k, (a, b) in enumerate(zip(outs, leaves)):
            x = cuda.as_numpy(a.data).astype(np.float64)
            y = cuda.as_numpy(b.data).astype(np.float64)
            diff = float(np.max(np.abs(x - y))) if x.size else 0.0
            worst = max(worst, diff)
            if x.shape != y.shape or not np.allclose(x, y, rtol=self.rtol, atol=self.atol):
                bad.append(f"output {k}: max abs difference {diff:.3g}")
        self.verify_left -= 1
        self.verify_report.append(worst)
        if bad or len(leaves) != len(outs):
            raise VerifyError(f"StaticGraph {self.name}: static and eager results differ "
                              f"({'; '.join(bad) or 'different number of outputs'}); the "
                              "trace does not represent this call")

    # ----- saving ----------------------------------------------------------------------
    def save(self, path):
        """Write the graph and its weights to ``path`` (a ``.lzg`` file; see
        ``lezero.jit.serialize`` for the format).  Returns the path."""
        from lezero.jit.serialize import save_graph
        return save_graph(self, path)
