"""Step 51: optimise a static graph with passes.

A graph is data, so programs can rewrite it.  Each pass takes a graph and returns a new
one: dead-code elimination drops what no output needs, constant folding computes what
depends on constants only (with ``freeze``, the weights count as constants: batch
norm's scale and shift are folded), common-subexpression elimination computes repeated
work once, fusion turns chains of elementwise operators into one generated Numba kernel
(one pass over memory instead of one per operator), and the memory plan frees each value
after its last reader and lets a fused kernel write over an input that dies there.
Run: python steps/step51.py
"""
import numpy as np

import lezero.functions as F
from lezero import jit
from lezero.jit import passes


def f(x, b):
    unused = F.exp(x) * 3.0                     # dead code
    a = F.relu(x * 0.5 + b)
    c = F.relu(x * 0.5 + b)                     # the same work twice
    return F.tanh(a + c) * 2.0


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    g = jit.trace(f, x, b, optimize=False).graph
    print(f"traced: {len(g.nodes)} nodes")
    print(g)
    for name in ("dce", "cse", "fuse", "memory"):
        g = passes.PASSES[name](g)
        print(f"after {name}: {len(g.nodes)} nodes {dict(g.op_counts())}")
    print(g)
    print(g.meta["memory"])
    from lezero.jit.executor import Program
    (y,) = Program(g).run_arrays([x, b])
    print(f"optimised vs eager: max difference {np.abs(y - f(x, b).data).max():.1e}")


if __name__ == "__main__":
    main()
