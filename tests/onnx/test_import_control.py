"""If, Loop and Scan (lezero/onnx/import_control.py) and the importer's subgraphs: models
imported by LeZero equal ONNX's reference evaluator; bodies see the enclosing graph's
values; gradients flow through the unrolled iterations; malformed or hostile subgraphs
(undefined names, nesting too deep, bad external data, endless loops) are clear errors."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

from lezero.onnx import import_control  # noqa: E402
from lezero.onnx.importer import OnnxImportError  # noqa: E402
from lezero.testing import check_gradient  # noqa: E402
from tests.onnx.test_import_new_ops import _load, _randn  # noqa: E402

h = onnx.helper
TP = onnx.TensorProto
F32, I64, BOOL = TP.FLOAT, TP.INT64, TP.BOOL


def _vi(name, dtype=F32, shape=None):
    return h.make_tensor_value_info(name, dtype, shape)


def _const(name, value):
    return h.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(
        np.asarray(value), name))


def _model(nodes, inputs, outputs, opset=17, inits=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _check(model, feeds, tmp_path, rtol=1e-6, atol=1e-6):
    """LeZero's outputs equal the reference evaluator's; returns LeZero's (arrays)."""
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = _load(model, tmp_path)(*feeds.values())
    got = [np.asarray(g.data) for g in (got if isinstance(got, tuple) else (got,))]
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {k}: {g.dtype}{g.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return got


# ----- If ------------------------------------------------------------------------------

def _if_model(dtype=F32):
    """y = If(c): then x * 2 (x from the outer graph), else x - 1."""
    then = h.make_graph([_const("two", np.array(2.0, np.float32 if dtype == F32 else
                                                np.float64)),
                         h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [_vi("t", dtype)])
    other = h.make_graph([_const("one", np.array(1.0, np.float32 if dtype == F32 else
                                                 np.float64)),
                          h.make_node("Sub", ["x", "one"], ["e"])], "else", [], [_vi("e", dtype)])
    node = h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    return _model([node], [_vi("c", BOOL, []), _vi("x", dtype, [3])], [_vi("y", dtype)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_runs_the_chosen_branch_with_the_outer_values(cond, tmp_path):
    x = np.array([1.0, -2.0, 0.5], np.float32)
    (y,) = _check(_if_model(), {"c": np.array(cond), "x": x}, tmp_path)
    assert y.tolist() == (x * 2 if cond else x - 1).tolist()


def test_if_is_differentiable_in_the_outer_values(tmp_path):
    feeds = {"c": np.array(True), "x": np.array([1.0, -2.0, 0.5])}
    module = _load(_if_model(TP.DOUBLE), tmp_path)
    check_gradient(lambda x: module(feeds["c"], x), feeds["x"])


def test_if_branch_with_too_many_outputs_is_an_error(tmp_path):
    two = h.make_graph([_const("a", 1.0), _const("b", 2.0)], "b", [], [_vi("a"), _vi("b")])
    node = h.make_node("If", ["c"], ["y"], then_branch=two, else_branch=two)
    model = _model([node], [_vi("c", BOOL, [])], [_vi("y")])
    with pytest.raises(OnnxImportError, match="If: the branch gives 2 outputs"):
        _load(model, tmp_path)(np.array(True))


# ----- Loop ----------------------------------------------------------------------------

def _loop_model(with_trips=True, with_cond=True, limit=None):
    """Loop carrying s (s += x * i) and scanning s; stops once s > limit if given."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=F32),
             h.make_node("Mul", ["x", "fi"], ["step"]),
             h.make_node("Add", ["s_in", "step"], ["s_out"]),
             h.make_node("Identity", ["s_out"], ["scan"])]
    if limit is None:
        nodes.append(h.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        nodes += [_const("lim", np.array(limit, np.float32)),
                  h.make_node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
                  h.make_node("Less", ["tot", "lim"], ["cond_out"])]
    body = h.make_graph(nodes, "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []),
                                        _vi("s_in", F32, [2])],
                        [_vi("cond_out", BOOL, []), _vi("s_out", F32, [2]),
                         _vi("scan", F32, [2])])
    ins = ["M" if with_trips else "", "go" if with_cond else "", "s0"]
    node = h.make_node("Loop", ins, ["s", "all"], body=body)
    inputs = [_vi("x", F32, [2]), _vi("s0", F32, [2])]
    inputs += [_vi("M", I64, [])] if with_trips else []
    inputs += [_vi("go", BOOL, [])] if with_cond else []
    return _model([node], inputs, [_vi("s"), _vi("all")], opset=13)


def test_loop_with_a_trip_count_matches_the_reference(tmp_path):
    x, s0 = np.array([1.0, 2.0], np.float32), np.array([0.5, 0.0], np.float32)
    feeds = {"x": x, "s0": s0, "M": np.array(4, np.int64), "go": np.array(True)}
    s, scans = _check(_loop_model(), feeds, tmp_path)
    assert s.tolist() == (s0 + x * 6).tolist() and scans.shape == (4, 2)


def test_loop_as_a_while_loop_stops_on_its_condition(tmp_path):
    x, s0 = np.array([1.0, 2.0], np.float32), np.zeros(2, np.float32)
    feeds = {"x": x, "s0": s0, "go": np.array(True)}
    s, scans = _check(_loop_model(with_trips=False, limit=10.0), feeds, tmp_path)
    assert scans.shape == (4, 2) and s.tolist() == [6.0, 12.0]      # sums 0, 3, 9, 18 > 10


def test_loop_that_runs_no_iteration_gives_empty_scans_of_the_declared_shape(tmp_path):
    feeds = {"x": np.ones(2, np.float32), "s0": np.ones(2, np.float32),
             "M": np.array(0, np.int64), "go": np.array(True)}
    s, scans = _load(_loop_model(), tmp_path)(*feeds.values())     # the reference fails
    assert s.data.tolist() == [1.0, 1.0]
    assert scans.shape == (0, 2) and scans.dtype == np.float32


def test_loop_is_differentiable_through_its_iterations(tmp_path):
    model = _loop_model()
    for vi in list(model.graph.input) + list(model.graph.output):
        if vi.type.tensor_type.elem_type == F32:
            vi.type.tensor_type.elem_type = TP.DOUBLE
    for node in model.graph.node[0].attribute[0].g.node:
        for a in node.attribute:
            if a.name == "to":
                a.i = TP.DOUBLE
    module = _load(model, tmp_path)
    m, go = np.array(3, np.int64), np.array(True)
    check_gradient(lambda x, s0: module(x, s0, m, go)[1], np.array([1.0, 2.0]),
                   np.array([0.5, -1.0]))


def test_an_endless_loop_stops_with_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(import_control, "MAX_ITERATIONS", 50)
    feeds = {"x": np.ones(2, np.float32), "s0": np.ones(2, np.float32), "go": np.array(True)}
    module = _load(_loop_model(with_trips=False), tmp_path)
    with pytest.raises(OnnxImportError, match="Loop: more than 50 iterations"):
        module(*feeds.values())


# ----- Scan ----------------------------------------------------------------------------

def _scan_body(dtype=F32):
    """state += x_t; out_t = state * y_t."""
    nodes = [h.make_node("Add", ["st_in", "xt"], ["st_out"]),
             h.make_node("Mul", ["st_out", "yt"], ["ot"])]
    return h.make_graph(nodes, "body", [_vi("st_in", dtype, [2]), _vi("xt", dtype, [2]),
                                        _vi("yt", dtype, [2])],
                        [_vi("st_out", dtype, [2]), _vi("ot", dtype, [2])])


def _scan_model(dtype=F32, **attrs):
    node = h.make_node("Scan", ["s0", "x", "y"], ["s", "o"], body=_scan_body(dtype),
                       num_scan_inputs=2, **attrs)
    return _model([node], [_vi("s0", dtype, [2]), _vi("x", dtype, None),
                           _vi("y", dtype, None)], [_vi("s", dtype), _vi("o", dtype)], opset=16)


def _scan_by_hand(s0, xs, ys):
    """(final state, outputs) of _scan_body over the leading axis of xs and ys."""
    outs = []
    for xt, yt in zip(xs, ys):
        s0 = s0 + xt
        outs.append(s0 * yt)
    return s0, np.stack(outs)


def test_scan_matches_the_reference(tmp_path):
    feeds = {"s0": _randn(2), "x": _randn(4, 2), "y": _randn(4, 2)}
    s, o = _check(_scan_model(), feeds, tmp_path, rtol=1e-5)
    np.testing.assert_allclose(o, _scan_by_hand(*feeds.values())[1], rtol=1e-5)


def test_scan_axes_and_directions_by_hand(tmp_path):
    """x scanned along axis 1, y backwards; outputs stacked on the last axis, prepended
    (the reference evaluator implements neither direction)."""
    s0, x, y = _randn(2), _randn(2, 4), _randn(4, 2)
    model = _scan_model(scan_input_axes=[1, 0], scan_input_directions=[0, 1],
                        scan_output_axes=[-1], scan_output_directions=[1])
    s, o = _load(model, tmp_path)(s0, x, y)
    s_ref, o_ref = _scan_by_hand(s0, x.T, y[::-1])
    np.testing.assert_allclose(s.data, s_ref, rtol=1e-6)
    np.testing.assert_allclose(o.data, o_ref[::-1].T, rtol=1e-6)


def test_scan_is_differentiable(tmp_path):
    module = _load(_scan_model(TP.DOUBLE), tmp_path)
    y = np.random.default_rng(1).standard_normal((3, 2))
    check_gradient(lambda s0, x: module(s0, x, y)[1], np.array([0.1, -0.2]),
                   np.random.default_rng(2).standard_normal((3, 2)))


def test_scan_opset_8_scans_each_batch_entry(tmp_path):
    node = h.make_node("Scan", ["", "s0", "x", "y"], ["s", "o"], body=_scan_body(),
                       num_scan_inputs=2, directions=[1, 0])
    model = _model([node], [_vi("s0", F32, [3, 2]), _vi("x", F32, [3, 4, 2]),
                            _vi("y", F32, [3, 4, 2])], [_vi("s"), _vi("o")], opset=8)
    s0, x, y = _randn(3, 2), _randn(3, 4, 2), _randn(3, 4, 2)
    s, o = _load(model, tmp_path)(s0, x, y)
    for b in range(3):                    # the reference evaluator lacks opset 8's Scan
        s_ref, o_ref = _scan_by_hand(s0[b], x[b, ::-1], y[b])
        np.testing.assert_allclose(s.data[b], s_ref, rtol=1e-6)
        np.testing.assert_allclose(o.data[b], o_ref, rtol=1e-6)


@pytest.mark.parametrize("attrs, x_shape, why", [
    ({}, (3, 2), "the scan inputs have different lengths"),
    ({"scan_input_axes": [0]}, (4, 2), "scan_input_axes has 1 entries for 2"),
    ({"scan_input_axes": [5, 0]}, (4, 2), r"scan_input_axes\[0\] = 5 is outside"),
])
def test_bad_scans_are_errors_naming_the_operator(attrs, x_shape, why, tmp_path):
    module = _load(_scan_model(**attrs), tmp_path)
    with pytest.raises(OnnxImportError, match=f"Scan: (attribute )?{why}"):
        module(_randn(2), _randn(*x_shape), _randn(4, 2))


# ----- the importer's checks of subgraphs ----------------------------------------------

def _if_reading(name, extra_nodes=()):
    body = h.make_graph([h.make_node("Identity", [name], ["t"])], "b", [], [_vi("t")])
    node = h.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    return _model(list(extra_nodes) + [node], [_vi("c", BOOL, []), _vi("x", F32, [2])],
                  [_vi("y")])


def _refused(model, tmp_path, why):
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(OnnxImportError, match=why):
        from lezero.onnx import load
        load(str(path))


def test_a_subgraph_reads_outer_values_and_not_undefined_ones(tmp_path):
    _check(_if_reading("x"), {"c": np.array(True), "x": _randn(2)}, tmp_path)
    _refused(_if_reading("nowhere"), tmp_path, "subgraph 'else_branch'.* reads 'nowhere' "
                                               "before it is defined")
    later = _if_reading("z")
    later.graph.node.append(h.make_node("Relu", ["x"], ["z"]))    # defined after the If
    _refused(later, tmp_path, "reads 'z' before it is defined")


def test_subgraphs_nested_too_deep_are_refused(tmp_path):
    leaf = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "leaf", [], [_vi("y")])
    body = leaf
    for k in range(20):
        node = h.make_node("If", ["c"], ["y"], then_branch=body, else_branch=leaf)
        body = h.make_graph([node], f"g{k}", [], [_vi("y")])
    model = _model(list(body.node), [_vi("c", BOOL, []), _vi("x", F32, [2])], [_vi("y")])
    _refused(model, tmp_path, "subgraphs nested 17 deep \\(at most 16\\)")


def test_an_unsupported_operator_inside_a_subgraph_is_named(tmp_path):
    body = h.make_graph([h.make_node("StringNormalizer", ["x"], ["t"])], "b", [], [_vi("t")])
    node = h.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    model = _model([node], [_vi("c", BOOL, []), _vi("x", F32, [2])], [_vi("y")])
    _refused(model, tmp_path, "uses operator 'StringNormalizer'")


def test_external_data_in_a_subgraph_is_checked(tmp_path):
    t = TP(name="w", data_type=F32, dims=[2], data_location=TP.EXTERNAL)
    t.external_data.add(key="location", value="../secret.bin")
    body = h.make_graph([h.make_node("Constant", [], ["t"], value=t)], "b", [], [_vi("t")])
    node = h.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    model = _model([node], [_vi("c", BOOL, [])], [_vi("y")])
    _refused(model, tmp_path, "climbs out of the model's folder")


def test_a_subgraphs_initializers_are_constants(tmp_path):
    body = h.make_graph([h.make_node("Add", ["x", "k"], ["t"])], "b", [], [_vi("t")],
                        [onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "k")])
    node = h.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    model = _model([node], [_vi("c", BOOL, []), _vi("x", F32, [2])], [_vi("y")])
    (y,) = _check(model, {"c": np.array(False), "x": np.zeros(2, np.float32)}, tmp_path)
    assert y.tolist() == [1.0, 2.0]
    assert not list(_load(model, tmp_path).parameters())
