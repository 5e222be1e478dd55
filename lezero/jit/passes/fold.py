"""Constant folding: a node whose every input is a constant runs once, at compile time,
and its outputs become constants.  ``freeze`` first turns parameters into constants, so
that with it everything computed from weights alone (batch norm's folded scale and
shift, a transposed weight) is folded too.

Dropout nodes are never folded (each call draws a new mask), nor is a result much larger
than its inputs (``broadcast_to`` would trade a cheap op for a big constant)."""
from lezero.jit.executor import evaluate
from lezero.jit.ir import ValueRef, resolve_refs
from lezero.jit.passes.dce import dce, is_stochastic

__all__ = ["fold_constants", "freeze"]

_GROWTH = 4            # fold only when the outputs are at most this many times the inputs
_SMALL = 1 << 16       # ... or smaller than this many bytes anyway


def freeze(graph):
    """A copy of ``graph`` whose parameters are constants (their current values)."""
    g = graph.copy()
    for name, p in list(g.params.items()):
        g.consts[name] = p.data.copy()     # a snapshot: optimizers update in place
        v = g.values[name]
        g.values[name] = type(v)(name, "const", v.shape, v.dtype)
    g.params = {}
    g.meta.pop("memory", None)
    return g


def _foldable(g, node):
    if node.sub is not None or is_stochastic(node) or node.fn_class is None:
        return False
    return all(g.values[n].kind == "const" for n in node.deps())


def fold_constants(graph):
    """A copy of ``graph`` with constant subexpressions computed."""
    g = graph.copy()
    kept = []
    folded = 0
    for node in g.nodes:
        if not _foldable(g, node):
            kept.append(node)
            continue
        xs = [g.consts[n] for n in node.inputs]
        out_bytes = sum(g.values[o].nbytes for o in node.outputs)
        in_bytes = sum(x.nbytes for x in xs)
        if out_bytes > max(_SMALL, _GROWTH * in_bytes):
            kept.append(node)
            continue
        ys = evaluate(node, xs, lambda name: g.consts[name])
        for name, y in zip(node.outputs, ys):
            g.consts[name] = y
            v = g.values[name]
            g.values[name] = type(v)(name, "const", y.shape, y.dtype)
        folded += 1
    g.nodes = kept
    # Attributes bound to a value that is now constant hold the array itself.
    for node in g.nodes:
        node.attrs = {k: resolve_refs(v, lambda n: g.consts[n] if n in g.consts
                                      else ValueRef(n)) for k, v in node.attrs.items()}
    g.meta["folded"] = g.meta.get("folded", 0) + folded
    return dce(g)
