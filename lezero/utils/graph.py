"""Draw the computational graph: DOT text always, PNG through Graphviz's ``dot`` if present."""
import os
import shutil
import subprocess

from lezero.core import Variable
from lezero.utils.files import atomic_write


def _var_node(v, verbose):
    label = v.name or ""
    if verbose and v.data is not None:
        label += (": " if label else "") + f"{v.shape} {v.dtype}"
    return f'{id(v)} [label="{label}", color=orange, style=filled]\n'


def _func_node(f):
    lines = [f'{id(f)} [label="{type(f).__name__}", color=lightblue, style=filled, shape=box]\n']
    for x in f.inputs:
        lines.append(f"{id(x)} -> {id(f)}\n")
    for ref in f.outputs:
        y = ref()
        if y is not None:
            lines.append(f"{id(f)} -> {id(y)}\n")
    return "".join(lines)


def get_dot_graph(output, verbose=True):
    """The graph that produced ``output`` as Graphviz DOT text (variables and functions)."""
    if not isinstance(output, Variable):
        raise TypeError(f"get_dot_graph: expected a Variable, got {type(output).__name__}")
    parts = [_var_node(output, verbose)]
    seen, funcs = {id(output)}, []          # each node is declared once

    def push(f):
        if f is not None and id(f) not in seen:
            seen.add(id(f))
            funcs.append(f)

    push(output.creator)
    while funcs:
        f = funcs.pop()
        parts.append(_func_node(f))
        for x in f.inputs:
            if id(x) not in seen:
                seen.add(id(x))
                parts.append(_var_node(x, verbose))
            push(x.creator)
    return "digraph g {\n" + "".join(parts) + "}\n"


def plot_dot_graph(output, verbose=True, to_file="graph.png"):
    """Render the graph with Graphviz to ``to_file`` (its extension picks the format).

    Writes the ``.dot`` text beside it in any case; raises RuntimeError with install
    advice when the ``dot`` program is missing.
    """
    dot_text = get_dot_graph(output, verbose)
    base, ext = os.path.splitext(to_file)
    dot_path = base + ".dot"
    atomic_write(dot_path, dot_text, where="plot_dot_graph")
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(f"plot_dot_graph: Graphviz 'dot' was not found; the DOT text was "
                           f"written to {dot_path}. Install Graphviz (apt-get install graphviz) "
                           "to render it.")
    # Graphviz writes to stdout; the picture then takes its name atomically like any file.
    image = subprocess.run([exe, "-T", ext[1:] or "png"], input=dot_text.encode(),
                           capture_output=True, check=True).stdout
    atomic_write(to_file, image, where="plot_dot_graph")
    return to_file
