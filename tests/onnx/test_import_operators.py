"""Each ONNX operator the importer maps, as a one-node model: LeZero's run of the imported
model equals onnxruntime's run of the same file (inputs as graph inputs, and as constant
initializers where the importer folds constants)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import lezero as lz  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402

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
