"""Graph passes: each takes a Graph and returns a new one (the input is not changed).

    dce(g)            dead-code elimination
    fold_constants(g) constant folding (nodes whose inputs are all constants)
    cse(g)            common-subexpression elimination (and equal constants merged)
    fuse(g)           chains of elementwise nodes -> one generated Numba kernel
    memory_pass(g)    buffer reuse: lifetimes, slots, in-place outputs (a memory plan)
    freeze(g)         parameters become constants (inference only)

``optimize(g)`` runs them in that order.  Each is testable alone; ``print(g)`` before and
after shows what it did.
"""
from lezero.jit.passes.cse import cse
from lezero.jit.passes.dce import dce
from lezero.jit.passes.fold import fold_constants, freeze
from lezero.jit.passes.fusion import fuse
from lezero.jit.passes.memory import MemoryPlan, memory_pass, plan_memory

__all__ = ["dce", "fold_constants", "freeze", "cse", "fuse", "memory_pass", "plan_memory",
           "MemoryPlan", "optimize", "PASSES"]

PASSES = {"dce": dce, "fold": fold_constants, "cse": cse, "fuse": fuse,
          "memory": memory_pass}


def optimize(graph, fuse=True, freeze=False, passes=None):
    """Run the passes (``passes``: names from ``PASSES``, default all; ``fuse=False``
    leaves fusion out; ``freeze`` first turns parameters into constants)."""
    names = list(passes) if passes is not None else list(PASSES)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise ValueError(f"jit.passes.optimize: unknown passes {unknown}; "
                         f"known: {sorted(PASSES)}")
    if freeze:
        graph = globals()["freeze"](graph)
    for name in names:
        if name == "fuse" and not fuse:
            continue
        graph = PASSES[name](graph)
    return graph
