"""``lezero.jit``: trace a run into a guarded static graph, optimise it, replay it, save it.

    from lezero import jit
    g = jit.trace(model, x)          # a StaticGraph, callable like model
    print(g)                         # the graph after the passes
    g.save("model.lzg"); g2 = jit.load("model.lzg")

See ``docs/jit.md``.
"""
from lezero.jit.api import trace
from lezero.jit.errors import GraphFormatError, GuardError, TraceError, TracerWarning, VerifyError
from lezero.jit.ir import Graph, Node, Value
from lezero.jit.static_graph import StaticGraph
from lezero.jit.tracer import is_tracing
from lezero.jit import passes


def load(path):
    """Load a graph written by ``StaticGraph.save`` (a ``.lzg`` file): a StaticGraph that
    runs without the Python code that made it.  The file is data: only LeZero's own
    operators and helper types are named, everything is checked before it runs, and any
    problem is a ``GraphFormatError`` naming the file (see ``docs/jit.md``)."""
    from lezero.jit.serialize import load_graph
    return load_graph(path)


__all__ = ["trace", "load", "is_tracing", "StaticGraph", "Graph", "Node", "Value", "passes", "TraceError",
           "GuardError", "VerifyError", "GraphFormatError", "TracerWarning"]
