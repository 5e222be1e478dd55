"""Each ONNX operator the importer maps, as a one-node model: LeZero's run of the imported
model equals onnxruntime's run of the same file (inputs as graph inputs, and as constant
initializers where the importer folds constants).  The smaller operators of
``lezero.onnx.import_extra`` are compared with ONNX's reference evaluator instead (with
onnxruntime where the reference is wrong), and their differentiable paths gradient-checked."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import lezero as lz  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402
from lezero.onnx.importer import OnnxImportError  # noqa: E402
from tests.onnx.test_import_fixes import (  # noqa: E402
    _gradient_flows, _load, _matches_onnxruntime, _matches_reference, _one_node, _outputs,
    _rand)

h = onnx.helper
RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
Y = RNG.standard_normal((2, 3, 4)).astype(np.float32)
POS = np.abs(X) + 0.5


def _i64(*v):
    return np.array(v, np.int64)


# (op, inputs, attributes): an input is an array (a graph input) or ("const", array)
CASES = [
    ("Div", [X, POS], {}), ("Max", [X, Y, POS], {}), ("Min", [X, Y], {}),
    ("Sum", [X, Y, POS], {}), ("Mean", [X, Y], {}),
    ("Erf", [X], {}), ("Softsign", [X], {}), ("HardSwish", [X], {}), ("Mish", [X], {}),
    ("LeakyRelu", [X], {"alpha": 0.2}), ("Elu", [X], {"alpha": 0.7}),
    ("Celu", [X], {"alpha": 1.3}), ("Selu", [X], {}), ("Softplus", [X], {}),
    ("HardSigmoid", [X], {"alpha": 0.3, "beta": 0.4}),
    ("PRelu", [X, ("const", np.full((4,), 0.25, np.float32))], {}),
    ("Shrink", [X], {"lambd": 0.5, "bias": 0.1}),
    ("Clip", [X, ("const", np.float32(-0.5)), ("const", np.float32(0.5))], {}),
    ("Clip", [X], {}),
    ("Where", [X > 0, X, Y], {}),
    ("Less", [X, Y], {}), ("GreaterOrEqual", [X, Y], {}), ("Equal", [X > 0, Y > 0], {}),
    ("And", [X > 0, Y > 0], {}), ("Xor", [X > 0, Y > 0], {}),
    ("Not", [X > 0], {}), ("IsNaN", [np.where(X > 1, np.nan, X).astype(np.float32)], {}),
    ("IsInf", [np.where(X > 1, np.inf, X).astype(np.float32)], {}),
    ("ReduceSum", [X, ("const", _i64(1))], {"keepdims": 0}),
    ("ReduceSum", [X], {}),
    ("ReduceMean", [X], {"axes": [0, 2]}),
    ("ReduceMax", [X], {"axes": [1], "keepdims": 0}),
    ("ReduceMin", [X], {"axes": [-1]}),
    ("ReduceProd", [X], {"axes": [2]}),
    ("ReduceLogSumExp", [X], {"axes": [1]}),
    ("ReduceL1", [X], {"axes": [2]}), ("ReduceL2", [X], {"axes": [2]}),
    ("ReduceSumSquare", [X], {"axes": [0]}),
    ("ArgMax", [X], {"axis": 1, "keepdims": 0}), ("ArgMin", [X], {"axis": -1}),
    ("CumSum", [X, ("const", np.int64(2))], {}),
    ("CumSum", [X, ("const", _i64(1))], {"reverse": 1}),
    ("Transpose", [X], {"perm": [2, 0, 1]}),
    ("Squeeze", [X[:, :1]], {}),
    ("Squeeze", [X[:, :1], ("const", _i64(1))], {}),
    ("Unsqueeze", [X, ("const", _i64(0, 3))], {}),
    ("Flatten", [X], {"axis": 2}),
    ("Expand", [X[:, :1], ("const", _i64(2, 3, 4))], {}),
    ("Tile", [X, ("const", _i64(1, 2, 1))], {}),
    ("Slice", [X, ("const", _i64(0)), ("const", _i64(2)), ("const", _i64(2)),
               ("const", _i64(1))], {}),
    ("Slice", [X, ("const", _i64(3)), ("const", _i64(0)), ("const", _i64(2)),
               ("const", _i64(-1))], {}),
    ("Split", [X, ("const", _i64(1, 3))], {"axis": 2}),
    ("Concat", [X, Y], {"axis": 1}),
    ("Gather", [X, ("const", _i64(2, 0))], {"axis": 1}),
    ("Pad", [X, ("const", _i64(0, 1, 0, 0, 0, 2))], {}),
    ("Pad", [X, ("const", _i64(0, 0, 1, 0, 0, 1)), ("const", np.float32(3.0))], {}),
    ("Shape", [X], {}),
    ("Size", [X], {}),
    ("Identity", [X], {}),
    ("Cast", [X], {"to": onnx.TensorProto.DOUBLE}),
    ("Range", [("const", np.float32(0)), ("const", np.float32(5)),
               ("const", np.float32(1.5))], {}),
    ("ConstantOfShape", [("const", _i64(2, 3))], {}),
]


def _model(op, inputs, attrs):
    graph_inputs, inits, names, feeds = [], [], [], {}
    for k, value in enumerate(inputs):
        name = f"in{k}"
        names.append(name)
        if isinstance(value, tuple):
            inits.append(onnx.numpy_helper.from_array(np.asarray(value[1]), name))
        else:
            value = np.asarray(value)
            graph_inputs.append(h.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
            feeds[name] = value
    n_out = 2 if op == "Split" else 1
    outs = [f"out{i}" for i in range(n_out)]
    node = h.make_node(op, names, outs, **attrs)
    graph = h.make_graph([node], "g", graph_inputs, [onnx.ValueInfoProto(name=o) for o in outs],
                         initializer=inits)
    opset = 18 if op == "Mish" else 17           # Mish arrived in opset 18
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    # the outputs' types, as ONNX's own shape inference gives them
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    for out in model.graph.output:
        out.CopyFrom(inferred[out.name])
    return model, feeds


@pytest.mark.parametrize("op,inputs,attrs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_imported_operator_matches_onnxruntime(tmp_path, op, inputs, attrs):
    model, feeds = _model(op, inputs, attrs)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    net = lonnx.load(path)
    with lz.no_grad():
        got = net(*feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = g.data if isinstance(g, lz.Variable) else np.asarray(g)
        assert g.shape == e.shape, f"{op}: shape {g.shape} != {e.shape}"
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(e, np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=op)


# ----- smaller operators (import_extra) -------------------------------------------------

I64 = np.int64
BOXES = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                   [0, 10.1, 1, 11.1], [0, 100, 1, 101]]], np.float32)
SCORES = np.array([[[.9, .75, .6, .95, .5, .3], [.1, .8, .85, .2, .9, .05]]], np.float32)
EXTRA = [  # (op, graph inputs, initializers, attributes, differentiable)
    ("CumProd", {"x": _rand(3, 4)}, {"a": np.array(1, I64)}, {"exclusive": 1, "reverse": 1},
     True),
    ("BitwiseXor", {"a": np.array([5, -3, 12], np.int32)}, {"b": np.int32([3, 7, -1])}, {},
     False),
    ("BitwiseNot", {"a": np.array([0, 7, 255], np.uint8)}, {}, {}, False),
    ("Hardmax", {"x": np.array([[1, 3, 3], [2, 0, 1]], np.float32)}, {}, {"axis": 1}, False),
    ("TopK", {"x": np.array([[1, 3, 3, 0], [5, 5, 2, 5]], np.float32)}, {"k": np.array([2])},
     {"axis": 1}, False),
    ("TopK", {"x": np.array([[1, 3, 3, 0], [5, 5, 2, 5]], np.int32)}, {"k": np.array([3])},
     {"axis": 1, "largest": 0}, False),
    ("TopK", {"x": _rand(3, 5)}, {"k": np.array([2])}, {"axis": 0}, True),
    ("LpNormalization", {"x": np.abs(_rand(3, 4)) + 0.1}, {}, {"axis": 0, "p": 1}, True),
    ("LpNormalization", {"x": _rand(3, 4)}, {}, {"p": 2}, True),
    ("OneHot", {"i": np.array([[0, -1], [5, 2]], I64)},
     {"d": np.array(4, I64), "v": np.array([2, 7], np.float32)}, {"axis": 1}, False),
    ("Compress", {"x": _rand(3, 4)}, {"c": np.array([True, False, True])}, {"axis": 0}, True),
    ("Compress", {"x": _rand(3, 4)}, {"c": np.array([False, True, True, False, True])}, {},
     True),
    ("SpaceToDepth", {"x": _rand(1, 2, 4, 6)}, {}, {"blocksize": 2}, True),
    ("DepthToSpace", {"x": _rand(1, 8, 2, 3)}, {}, {"blocksize": 2, "mode": "CRD"}, True),
    ("DepthToSpace", {"x": _rand(1, 8, 2, 3)}, {}, {"blocksize": 2}, True),
    ("Swish", {"x": _rand(2, 5)}, {}, {"alpha": 1.5}, True),
    ("ThresholdedRelu", {"x": _rand(2, 5) * 2}, {}, {"alpha": 0.5}, True),
    ("EyeLike", {"x": np.zeros((3, 4), np.int32)}, {}, {"k": 1, "dtype": 1}, False),
    ("GatherND", {"x": _rand(2, 3, 4)}, {"i": np.array([[[1], [-1]], [[0], [2]]], I64)},
     {"batch_dims": 1}, True),
    ("GatherND", {"x": _rand(2, 3, 4)}, {"i": np.array([[1, 2], [0, -1]], I64)}, {}, True),
    ("ReverseSequence", {"x": _rand(4, 3, 2)}, {"s": np.array([4, 1, 2], I64)}, {}, True),
    ("ReverseSequence", {"x": _rand(3, 4)}, {"s": np.array([1, 2, 3], I64)},
     {"batch_axis": 0, "time_axis": 1}, True),
    ("GroupNormalization", {"x": _rand(2, 4, 3), "s": _rand(4), "b": _rand(4)}, {},
     {"num_groups": 2, "epsilon": 1e-3}, True),
    ("CenterCropPad", {"x": _rand(5, 4, 3)}, {"shape": np.array([3, 7])}, {"axes": [0, 2]},
     True),
    ("GridSample", {"x": _rand(1, 2, 4, 5), "g": _rand(1, 3, 2, 2) * 0.9}, {},
     {"mode": "linear", "padding_mode": "border"}, True),
    ("GridSample", {"x": _rand(1, 2, 4, 5), "g": _rand(1, 3, 2, 2) * 1.2}, {},
     {"mode": "nearest", "align_corners": 1, "padding_mode": "reflection"}, False),
    ("Det", {"x": _rand(2, 3, 3)}, {}, {}, True),
    ("Unique", {"x": np.array([[2, 1, 2], [0, 1, 5]], np.float32)}, {}, {}, False),
    ("Unique", {"x": np.array([[2, 1], [0, 1], [2, 1]], np.int32)}, {}, {"axis": 0}, False),
    ("NonZero", {"x": np.array([[1, 0], [0, 3]], np.float32)}, {}, {}, False),
    ("MeanVarianceNormalization", {"x": _rand(2, 3, 2, 2)}, {}, {}, True),
    ("RotaryEmbedding", {"x": _rand(2, 2, 3, 4), "c": _rand(2, 3, 2), "s": _rand(2, 3, 2)},
     {}, {}, True),
    ("RotaryEmbedding", {"x": _rand(2, 3, 8), "c": _rand(5, 1), "s": _rand(5, 1)},
     {"p": np.array([[0, 2, 4], [1, 1, 3]])},
     {"num_heads": 2, "rotary_embedding_dim": 2, "interleaved": 1}, True),
    ("Col2Im", {"x": _rand(1, 8, 6)}, {"i": np.array([3, 4]), "b": np.array([2, 2])}, {},
     True),
    ("Col2Im", {"x": _rand(1, 4, 16)}, {"i": np.array([4, 5]), "b": np.array([2, 2])},
     {"dilations": [2, 1], "pads": [1, 0, 1, 0]}, True),
    ("NonMaxSuppression", {"b": BOXES, "s": SCORES}, {"m": np.array([3]),
                                                      "t": np.float32([0.5])}, {}, False),
    ("NonMaxSuppression", {"b": BOXES[..., [1, 0, 3, 2]], "s": SCORES},
     {"m": np.array([2]), "t": np.float32([0.4]), "st": np.float32([0.5])}, {}, False),
    ("HammingWindow", {}, {"n": np.array(6, np.int32)}, {"periodic": 0}, False),
    ("BlackmanWindow", {}, {"n": np.array(5, np.int32)}, {"output_datatype": 11}, False),
]


@pytest.mark.parametrize("op,feeds,consts,attrs,grad", EXTRA,
                         ids=[f"{e[0]}-{k}" for k, e in enumerate(EXTRA)])
def test_smaller_operators(op, feeds, consts, attrs, grad, tmp_path):
    outputs = {"TopK": 2, "Unique": 4}.get(op, 1)
    model = _one_node(op, feeds, consts, attrs=attrs, outputs=outputs, opset=26)
    _matches_reference(model, feeds, tmp_path)
    if grad:
        _gradient_flows(model, feeds, tmp_path)


def test_unique_in_order_of_first_occurrence(tmp_path):
    x = np.array([[2, 1, 2], [0, 1, 5]], np.float32)       # the reference evaluator fails
    model = _one_node("Unique", {"x": x}, attrs={"sorted": 0}, outputs=4)
    y, first, inverse, counts = _outputs(_load(model, tmp_path), {"x": x})
    np.testing.assert_array_equal(y, [2, 1, 0, 5])
    for got, want in ((first, [0, 1, 3, 5]), (inverse, [0, 1, 0, 2, 1, 3]),
                      (counts, [2, 2, 1, 1])):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_an_unknown_grid_sample_mode_is_refused(tmp_path):
    feeds = {"x": _rand(1, 1, 3, 3), "g": _rand(1, 2, 2, 2)}
    model = _one_node("GridSample", feeds, attrs={"mode": "area"}, opset=20)
    with pytest.raises(OnnxImportError, match="GridSample with mode 'area'"):
        _outputs(_load(model, tmp_path), feeds)


def test_rotary_embedding_refuses_a_cache_of_the_wrong_rank(tmp_path):
    feeds = {"x": _rand(1, 2, 3, 4), "c": _rand(3, 2), "s": _rand(3, 2)}   # no ids: 3-D
    with pytest.raises(OnnxImportError, match="RotaryEmbedding: cos_cache of shape"):
        _outputs(_load(_one_node("RotaryEmbedding", feeds, opset=23), tmp_path), feeds)


def test_l1_normalization_of_negative_values(tmp_path):
    """The norm sums absolute values (ONNX's reference evaluator sums the signed ones)."""
    x = np.array([[1, -3, 0], [-2, 2, 0]], np.float32)
    model = _one_node("LpNormalization", {"x": x}, attrs={"axis": 1, "p": 1}, opset=22)
    _matches_onnxruntime(model, {"x": x}, tmp_path)
    got = _outputs(_load(model, tmp_path), {"x": x})[0]
    np.testing.assert_allclose(got, [[0.25, -0.75, 0], [-0.5, 0.5, 0]])
