"""The graph IR prints readably and draws as DOT that a real parser reads."""
import numpy as np
import pytest

import lezero as lz
from lezero import jit, nn
from lezero.jit import ir


def _graph(optimize=True):
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)).eval()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    return jit.trace(model, x, optimize=optimize).graph


def test_text_form_lists_signature_parameters_nodes_and_return():
    g = _graph(optimize=False)
    text = str(g)
    assert text.startswith("graph(") and text.rstrip().endswith("}")
    assert "float32[3, 4]" in text.splitlines()[0]
    assert "parameters:" in text and ", ..." in text      # more than four parameters
    assert text.count(" = ") == len(g.nodes)
    assert "return %" in text
    assert repr(g) == text


def test_fused_nodes_print_and_draw_their_members():
    g = _graph(optimize=True)
    fused = [n for n in g.nodes if n.sub is not None]
    assert fused, "batch norm's scale and shift with the ReLU should fuse"
    assert "+".join(n.op for n in fused[0].sub) in str(g)


def test_dot_text_parses_and_has_one_box_per_node():
    pydot = pytest.importorskip("pydot")
    g = _graph(optimize=False)
    dot = g.to_dot(title="mlp")
    (parsed,) = pydot.graph_from_dot_data(dot)
    boxes = [n for n in parsed.get_nodes() if n.get_shape() == "box"]
    assert len(boxes) == len(g.nodes)
    outputs = [n for n in parsed.get_nodes() if n.get_name().strip('"').startswith("out:")]
    assert len(outputs) == len(g.outputs)
    assert 'label="mlp"' in dot


def test_format_attr_shortens_what_it_prints():
    assert ir.format_attr(np.arange(3)) == "[0,1,2]"
    assert ir.format_attr(np.zeros((5, 5), np.float32)) == "array<float32[5, 5]>"
    assert ir.format_attr(tuple(range(8))) == "(0, 1, 2, 3, 4, 5, ...)"
    assert ir.format_attr([1, 2]) == "[1, 2]"
    assert ir.format_attr({"a": 1, "b": (2, 3)}) == "{a: 1, b: (2, 3)}"
    assert ir.format_attr(ir.ValueRef("v3")) == "%v3"
    assert ir.format_attr("x" * 50) == repr("x" * 50)[:37] + "..."
    assert ir.format_attr(nn.ReLU()) == "ReLU"


def test_value_and_value_ref_basics():
    v = ir.Value("a", "input", (2, 3), np.float32)
    assert v.nbytes == 24 and v.type_str() == "float32[2, 3]"
    assert repr(v) == "Value(%a: float32[2, 3], input)"
    with pytest.raises(ValueError, match="kind must be one of"):
        ir.Value("a", "weights", (2,), np.float32)
    assert ir.ValueRef("a") == ir.ValueRef("a") and ir.ValueRef("a") != ir.ValueRef("b")
    assert len({ir.ValueRef("a"), ir.ValueRef("a")}) == 1
    assert ir.ValueRef("a") != "a"


def test_node_copy_is_deep_for_fused_members():
    g = _graph(optimize=False)
    node = g.nodes[0]
    twin = node.copy()
    assert twin is not node and twin.op == node.op and twin.inputs == node.inputs
    assert repr(twin).startswith(f"Node({node.op}:")
