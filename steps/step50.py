"""Step 50: trace a run into a static graph.

A define-by-run program builds its graph anew on every call.  ``jit.trace`` runs it once
and reads the operators that run executed off the Function graph (each Variable's
``creator``, each Function's ``inputs``), giving a straight-line program with the
parameters as live inputs.  The StaticGraph replays that program: same signature, same
outputs.  It is guarded: a call with another shape is refused with the reason, and a
value read in Python during the trace (``float(x.sum())``) is reported with its line,
because the branch it chose is frozen into the graph.
Run: python steps/step50.py
"""
import os
import re
import warnings

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import jit, nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        return F.softmax(self.fc2(F.tanh(self.fc1(x))), axis=1)


def main():
    lz.manual_seed(0)
    net = TinyNet().eval()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    graph = jit.trace(net, x, optimize=False)
    print("the traced graph:")
    print(graph)
    with lz.no_grad():
        diff = np.abs(graph(x).data - net(x).data).max()
    print(f"replay vs eager: max difference {diff:.1e}")

    try:
        graph(np.ones((5, 4), np.float32))
    except jit.GuardError as e:
        print("a different shape is refused:", str(e).split(": ", 1)[1][:70], "...")

    def branchy(v):
        return v * 2 if float(v.sum()) > 0 else -v
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jit.trace(branchy, np.abs(x), check_trace=False)
    where = re.search(r"__float__\(\) at (\S+)\)", str(caught[0].message)).group(1)
    print("reported: float() of a traced value at", os.path.basename(where))


if __name__ == "__main__":
    main()
