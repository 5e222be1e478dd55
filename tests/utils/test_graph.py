"""utils/graph.py: the DOT text of a known expression has exactly the expected nodes and
edges, parses with a real DOT parser (pydot), and renders when Graphviz is installed."""
import shutil

import numpy as np
import pytest

import lezero as lz
from lezero.utils import get_dot_graph, plot_dot_graph

pydot = pytest.importorskip("pydot")


def _expression():
    x = lz.Variable(np.array(2.0), name="x")
    w = lz.Variable(np.array([1.0, 2.0]), name="w")
    y = (x * w + x).sum()
    y.name = "y"
    return x, w, y


def _parse(text):
    (graph,) = pydot.graph_from_dot_data(text)
    labels = {n.get_name(): n.get("label").strip('"') for n in graph.get_nodes()
              if n.get("label") is not None}
    edges = {(labels[e.get_source()], labels[e.get_destination()]) for e in graph.get_edges()}
    return graph, labels, edges


def test_dot_text_has_the_expected_nodes_and_edges():
    x, w, y = _expression()
    graph, labels, edges = _parse(get_dot_graph(y, verbose=False))
    functions = sorted(v for v in labels.values() if v and v[0].isupper())
    assert functions == ["Add", "Mul", "Sum"]
    assert sorted(v for v in labels.values() if v in ("x", "w", "y")) == ["w", "x", "y"]
    # x feeds Mul and Add; w feeds Mul; Mul -> (unnamed) -> Add -> (unnamed) -> Sum -> y.
    assert ("x", "Mul") in edges and ("w", "Mul") in edges and ("x", "Add") in edges
    assert ("Sum", "y") in edges
    assert len(edges) == 8        # 3 inputs of Mul/Add, 2 intermediates in and out, Sum's
    ids = {n.get_name() for n in graph.get_nodes()}
    assert str(id(x)) in ids and str(id(y)) in ids
    assert len(labels) == 8                 # 5 variables (2 unnamed), 3 functions
    declared = [line.split()[0] for line in get_dot_graph(y).splitlines() if "[label=" in line]
    assert len(declared) == len(set(declared)) == 8, "a node is declared twice"


def test_verbose_labels_carry_shape_and_dtype():
    _, _, y = _expression()
    _, labels, _ = _parse(get_dot_graph(y, verbose=True))
    assert "w: (2,) float64" in labels.values()
    assert "y: () float64" in labels.values()


def test_a_variable_without_creator_is_one_node():
    x = lz.Variable(np.ones(3), name="alone")
    graph, labels, edges = _parse(get_dot_graph(x, verbose=False))
    assert list(labels.values()) == ["alone"] and edges == set()


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="get_dot_graph: expected a Variable, got ndarray"):
        get_dot_graph(np.ones(2))


def test_plot_writes_the_dot_text_and_renders_or_says_how(tmp_path):
    _, _, y = _expression()
    target = tmp_path / "g.png"
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="Graphviz 'dot' was not found"):
            plot_dot_graph(y, to_file=str(target))
        assert (tmp_path / "g.dot").read_text() == get_dot_graph(y)
        return
    plot_dot_graph(y, to_file=str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "g.dot").read_text() == get_dot_graph(y)
