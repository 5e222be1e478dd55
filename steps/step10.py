"""Step 10: draw the computational graph.

``lz.utils.get_dot_graph(y)`` returns Graphviz DOT text for the graph behind ``y``
(orange: variables, blue: functions).  ``plot_dot_graph`` renders it when Graphviz's
``dot`` program is installed; otherwise it says so and keeps the .dot file.  Both go
into a temporary folder, so running the step leaves nothing behind.
Run: python steps/step10.py
"""
import os
import tempfile

import numpy as np

import lezero as lz


def goldstein(x, y):
    return (1 + (x + y + 1) ** 2 * (19 - 14 * x + 3 * x ** 2 - 14 * y + 6 * x * y + 3 * y ** 2)) * \
        (30 + (2 * x - 3 * y) ** 2 * (18 - 32 * x + 12 * x ** 2 + 48 * y - 36 * x * y + 27 * y ** 2))


x, y = lz.Variable(np.array(1.0), name="x"), lz.Variable(np.array(1.0), name="y")
z = goldstein(x, y)
z.name = "z"
dot = lz.utils.get_dot_graph(z, verbose=False)
print("DOT text has", dot.count("->"), "edges; first lines:")
print("\n".join(dot.splitlines()[:4]))
with tempfile.TemporaryDirectory() as tmp:
    try:
        path = lz.utils.plot_dot_graph(z, verbose=False, to_file=os.path.join(tmp, "goldstein.png"))
        print("rendered to", os.path.basename(path), "in a temporary folder")
    except RuntimeError as e:
        print(str(e).replace(tmp + os.sep, ""))
