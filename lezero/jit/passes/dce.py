"""Dead-code elimination: drop nodes none of whose outputs reaches a graph output.

Dropout nodes are kept even when dead: they draw from the random generator, and
dropping them would change every later draw compared with eager execution."""
__all__ = ["dce", "is_stochastic"]


def is_stochastic(node):
    """True for nodes whose replay draws random numbers."""
    return "_dropout" in node.attrs or any(is_stochastic(n) for n in node.sub or ())


def dce(graph):
    """A copy of ``graph`` without dead nodes (and without the values only they used)."""
    g = graph.copy()
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if is_stochastic(node) or any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(node.deps())
    g.nodes = kept[::-1]
    g.prune_values()
    g.meta.pop("memory", None)
    return g
