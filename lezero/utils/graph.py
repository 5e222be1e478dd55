"""Draw the computational graph: DOT text always, PNG through Graphviz's ``dot`` if present."""
import os
import shutil
import subprocess

from lezero.core import InputRef, Variable
from lezero.utils.files import atomic_write


def _node_id(x):
    """A value's DOT name: its Variable's id, or for a freed one (an ``InputRef`` whose
    Variable is gone) its creator's id and position, so both ends of an edge agree."""
    if isinstance(x, InputRef):
        v = x.creator.outputs[x.index]() if x.creator is not None else None
        return f"{id(x.creator)}_{x.index}" if v is None else str(id(v))
    return str(id(x))


def _var_node(v, verbose):
    label = v.name or ""
    if verbose and isinstance(v, Variable) and v.data is not None:
        label += (": " if label else "") + f"{v.shape} {v.dtype}"
    return f'{_node_id(v)} [label="{label}", color=orange, style=filled]\n'


def _func_node(f):
    lines = [f'{id(f)} [label="{type(f).__name__}", color=lightblue, style=filled, shape=box]\n']
    for x in f.inputs:
        lines.append(f"{_node_id(x)} -> {id(f)}\n")
    for k, ref in enumerate(f.outputs):
        y = ref()
        lines.append(f"{id(f)} -> {id(f)}_{k}\n" if y is None else f"{id(f)} -> {id(y)}\n")
    return "".join(lines)


def get_dot_graph(output, verbose=True):
    """The graph that produced ``output`` as Graphviz DOT text (variables and functions)."""
    if not isinstance(output, Variable):
        raise TypeError(f"get_dot_graph: expected a Variable, got {type(output).__name__}")
    parts = [_var_node(output, verbose)]
    seen, funcs = {_node_id(output)}, []    # each node is declared once

    def push(f):
        if f is not None and id(f) not in seen:
            seen.add(id(f))
            funcs.append(f)

    push(output.creator)
    while funcs:
        f = funcs.pop()
        parts.append(_func_node(f))
        for x in f.inputs:
            if _node_id(x) not in seen:
                seen.add(_node_id(x))
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
