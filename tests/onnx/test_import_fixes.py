"""ONNX operators the importer used to get silently wrong or refuse, one-node models each:
LeZero's run of the imported file equals ONNX's reference evaluator on it (dtype, shape
and values), the differentiable paths pass a float64 gradient check through the imported
graph, and what stays unsupported raises an error naming the operator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

from lezero.core import Variable  # noqa: E402
from lezero.onnx import load  # noqa: E402
from lezero.onnx.importer import OnnxImportError  # noqa: E402
from lezero.testing import check_gradient  # noqa: E402

h = onnx.helper
RNG = np.random.default_rng(1)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _one_node(op, feeds, consts=None, attrs=None, outputs=1, opset=18, order=None):
    """A model of one ``op`` node: ``feeds`` ({name: array}) are graph inputs, ``consts``
    initializers; ``order`` lists the node's inputs ('' for an omitted one)."""
    consts = consts or {}
    names = order if order is not None else list(feeds) + list(consts)
    outs = [f"y{k}" for k in range(outputs)] if isinstance(outputs, int) else outputs
    node = h.make_node(op, names, outs, **(attrs or {}))
    graph = h.make_graph(
        [node], "g",
        [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in feeds.items()],
        [h.make_tensor_value_info(o, 0, None) for o in outs if o],
        initializer=[onnx.numpy_helper.from_array(np.asarray(a), n) for n, a in
                     consts.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _load(model, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    return load(path)


def _outputs(module, feeds):
    got = module(*feeds.values())
    return [np.asarray(g.data) for g in (got if isinstance(got, tuple) else (got,))]


def _matches_reference(model, feeds, tmp_path, rtol=1e-5, atol=1e-6):
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = _outputs(_load(model, tmp_path), feeds)
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert (g.dtype, g.shape) == (e.dtype, e.shape), f"output {k}: {g.dtype}{g.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return got


def _matches_onnxruntime(model, feeds, tmp_path, rtol=1e-5, atol=1e-6):
    """As ``_matches_reference``, against onnxruntime (for what ONNX's reference
    evaluator ignores: recurrent ``clip`` and ``sequence_lens``)."""
    ort = pytest.importorskip("onnxruntime")
    typed = onnx.shape_inference.infer_shapes(model)        # onnxruntime wants output types
    inferred = {v.name: v for v in typed.graph.value_info}
    for out in typed.graph.output:
        out.CopyFrom(inferred.get(out.name, out))
    session = ort.InferenceSession(typed.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    got = _outputs(_load(model, tmp_path), feeds)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert (g.dtype, g.shape) == (e.dtype, e.shape), f"output {k}: {g.dtype}{g.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")


def _gradient_flows(model, feeds, tmp_path, output=0):
    """Backward of output ``output`` through the imported graph equals central
    differences (float64 inputs)."""
    module = _load(model, tmp_path)

    def fn(*xs):
        out = module(*xs)
        return out[output] if isinstance(out, tuple) else out
    check_gradient(fn, *feeds.values(), rtol=1e-4, atol=1e-6)


# ----- elementwise: integer division, Pow, Clip, IsInf, ArgMax, CumSum -----------------

def test_integer_div_truncates_toward_zero(tmp_path):
    a = np.array([7, -7, 7, -7, 6, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4], np.int32)
    got = _matches_reference(_one_node("Div", {"a": a, "b": b}), {"a": a, "b": b}, tmp_path)
    np.testing.assert_array_equal(got[0], [3, -3, -3, 3, 2, 0])


@pytest.mark.parametrize("base,exponent", [
    (np.float32, np.int64), (np.float32, np.int32), (np.int32, np.float32),
    (np.int64, np.float32)])
def test_pow_keeps_the_base_dtype(base, exponent, tmp_path):
    feeds = {"x": np.array([1, 2, 3], base), "y": np.array([2, 3, 1], exponent)}
    got = _matches_reference(_one_node("Pow", feeds), feeds, tmp_path)
    assert got[0].dtype == base


def test_pow_float_base_integer_exponent_is_differentiable(tmp_path):
    model = _one_node("Pow", {"x": _rand(5) + 3}, consts={"e": np.array(3, np.int64)})
    _gradient_flows(model, {"x": np.abs(_rand(5)) + 0.5}, tmp_path)


@pytest.mark.parametrize("bounds", [("", "hi"), ("lo", ""), ("lo", "hi")])
def test_clip_on_int8_stays_int8(bounds, tmp_path):
    x = np.array([-128, -5, 0, 5, 127], np.int8)
    consts = {"lo": np.int8(-3), "hi": np.int8(4)}
    consts = {k: v for k, v in consts.items() if k in bounds}
    model = _one_node("Clip", {"x": x}, consts, order=["x", *bounds])
    got = _matches_reference(model, {"x": x}, tmp_path)
    assert got[0].dtype == np.int8


@pytest.mark.parametrize("attrs", [{"detect_negative": 0}, {"detect_positive": 0}, {}])
def test_isinf_detects_the_asked_sign(attrs, tmp_path):
    x = np.array([-np.inf, np.inf, 1.0, np.nan, -2.0, np.inf], np.float32)
    _matches_reference(_one_node("IsInf", {"x": x}, attrs=attrs), {"x": x}, tmp_path)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_extremes_select_last_index(op, keepdims, tmp_path):
    x = np.array([[2, 2, 1, 2], [3, 1, 3, 1]], np.float32)
    model = _one_node(op, {"x": x}, attrs={"axis": 1, "keepdims": keepdims,
                                           "select_last_index": 1})
    got = _matches_reference(model, {"x": x}, tmp_path)
    assert list(got[0].reshape(-1)) == ([3, 2] if op == "ArgMax" else [2, 3])


@pytest.mark.parametrize("attrs", [{}, {"exclusive": 1}, {"reverse": 1},
                                   {"exclusive": 1, "reverse": 1}])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_cumsum_exclusive_reverse_and_dtype(attrs, dtype, tmp_path):
    x = np.arange(1, 13).reshape(3, 4).astype(dtype)
    model = _one_node("CumSum", {"x": x}, {"axis": np.array(1, np.int32)}, attrs=attrs)
    _matches_reference(model, {"x": x}, tmp_path)


def test_cumsum_exclusive_reverse_is_differentiable(tmp_path):
    x = _rand(3, 4)
    model = _one_node("CumSum", {"x": x}, {"axis": np.array(-1, np.int64)},
                      attrs={"exclusive": 1, "reverse": 1})
    _gradient_flows(model, {"x": x}, tmp_path)


def test_narrowing_cast_keeps_the_gradient(tmp_path):
    x = _rand(3, 4, dtype=np.float64)
    model = _one_node("Cast", {"x": x}, attrs={"to": onnx.TensorProto.FLOAT})
    module = _load(model, tmp_path)
    v = Variable(x)
    y = module(v)
    assert y.dtype == np.float32
    (y * y).sum().backward()
    np.testing.assert_allclose(v.grad.data, 2 * x, rtol=1e-6)
    assert v.grad.dtype == np.float64


# ----- reductions ---------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceSum",
                                "ReduceProd", "ReduceL2", "ReduceLogSum"])
def test_reduction_over_an_empty_axis_gives_the_identity(op, tmp_path):
    x = np.zeros((2, 0, 4), np.float32)
    model = _one_node(op, {"x": x}, {"axes": np.array([1], np.int64)})
    _matches_reference(model, {"x": x}, tmp_path)


def test_reduce_log_sum_and_noop_with_empty_axes(tmp_path):
    x = np.abs(_rand(2, 3)) + 0.1
    _matches_reference(_one_node("ReduceLogSum", {"x": x}, {"axes": np.array([1])}),
                       {"x": x}, tmp_path)
    model = _one_node("ReduceSum", {"x": x}, {"axes": np.zeros(0, np.int64)},
                      attrs={"noop_with_empty_axes": 1})
    np.testing.assert_array_equal(_matches_reference(model, {"x": x}, tmp_path)[0], x)


@pytest.mark.parametrize("axis", [2, 0, -1, 1])
def test_flatten_at_every_axis_including_the_rank(axis, tmp_path):
    x = _rand(3, 4)                     # torch.onnx writes axis=2 for a 2-D mask
    got = _matches_reference(_one_node("Flatten", {"x": x}, attrs={"axis": axis}),
                             {"x": x}, tmp_path)
    assert got[0].shape == {2: (12, 1), 0: (1, 12), -1: (3, 4), 1: (3, 4)}[axis]


# ----- Pad, ScatterElements, Dropout --------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode, tmp_path):
    x = _rand(2, 3, 4)
    model = _one_node("Pad", {"x": x}, {"pads": np.array([0, 2, 1, 0, 1, 3])},
                      attrs={"mode": mode})
    _matches_reference(model, {"x": x}, tmp_path)
    _gradient_flows(model, {"x": x}, tmp_path)


def test_pad_negative_pads_crop_and_value_is_one_element(tmp_path):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    model = _one_node("Pad", {"x": x}, {"pads": np.array([-1, 2, 1, -1]),
                                        "v": np.array([7], np.int32)})
    got = _outputs(_load(model, tmp_path), {"x": x})[0]     # the reference refuses < 0
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.pad(x[1:, :3], ((0, 1), (2, 0)), constant_values=7))


def test_pad_before_opset_11_reads_the_value_attribute(tmp_path):
    x = _rand(2, 2)
    model = _one_node("Pad", {"x": x}, attrs={"pads": [1, 0, 0, 1], "value": 2.5}, opset=10)
    got = _outputs(_load(model, tmp_path), {"x": x})[0]
    np.testing.assert_array_equal(got, np.pad(x, ((1, 0), (0, 1)), constant_values=2.5))


def test_pad_refuses_an_unknown_mode_and_cropping_reflect(tmp_path):
    x = _rand(4, 4)
    for attrs, pads in (({"mode": "mirror"}, [1, 1, 1, 1]), ({"mode": "reflect"},
                                                             [-1, 1, 1, 1])):
        model = _one_node("Pad", {"x": x}, {"pads": np.array(pads)}, attrs=attrs)
        with pytest.raises(OnnxImportError, match="Pad"):
            _outputs(_load(model, tmp_path), {"x": x})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_reductions(reduction, tmp_path):
    data = _rand(3, 4)
    idx = np.array([[1, 0, -1], [1, 1, 0]], np.int64)        # repeats, and a negative
    src = _rand(2, 3)
    if reduction == "none":
        idx = np.array([[1, 0, -1], [2, 1, 0]], np.int64)
    model = _one_node("ScatterElements", {"data": data, "src": src}, {"idx": idx},
                      attrs={"axis": 0, "reduction": reduction}, order=["data", "idx", "src"])
    _matches_reference(model, {"data": data, "src": src}, tmp_path)
    _gradient_flows(model, {"data": data, "src": src}, tmp_path)


def test_scatter_elements_on_constant_arrays(tmp_path):
    data = np.arange(6, dtype=np.int64).reshape(2, 3)
    model = _one_node("ScatterElements", {}, {"d": data, "i": np.array([[2, 2]]),
                                              "s": np.array([[5, 4]], np.int64)},
                      attrs={"axis": 1, "reduction": "max"})
    got = _outputs(_load(model, tmp_path), {})[0]
    np.testing.assert_array_equal(got, [[0, 1, 5], [3, 4, 5]])


def test_dropout_in_training_mode(tmp_path):
    x = _rand(3, 4)
    consts = {"ratio": np.array(0.0, np.float32), "training": np.array(True)}
    model = _one_node("Dropout", {"x": x}, consts, outputs=2)
    got = _matches_reference(model, {"x": x}, tmp_path)
    assert got[1].all()
    consts["ratio"] = np.array(0.5, np.float32)
    model = _one_node("Dropout", {"x": x}, consts, outputs=2)
    with pytest.raises(OnnxImportError, match="Dropout in training mode.*ratio 0.5"):
        _outputs(_load(model, tmp_path), {"x": x})


# ----- pooling --------------------------------------------------------------------------

POOLS = [
    ("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER"}),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1,
                     "count_include_pad": 1, "pads": [1, 0, 1, 0]}),
    ("MaxPool", {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),
    ("MaxPool", {"kernel_shape": [2, 3], "pads": [0, 1, 1, 0], "strides": [2, 2],
                 "dilations": [2, 1]}),
    ("LpPool", {"kernel_shape": [2, 2], "p": 3, "pads": [1, 1, 0, 0]}),
]


@pytest.mark.parametrize("op,attrs", POOLS, ids=[f"{o}-{k}" for k, (o, _) in enumerate(POOLS)])
def test_pooling_geometry(op, attrs, tmp_path):
    x = _rand(1, 2, 7, 6)
    model = _one_node(op, {"x": x}, attrs=attrs, opset=19)        # dilated averages: 19
    _matches_reference(model, {"x": x}, tmp_path)
    _gradient_flows(model, {"x": x}, tmp_path)


def test_average_pool_3d_dilations(tmp_path):
    x = _rand(1, 1, 5, 5, 5)
    model = _one_node("AveragePool", {"x": x}, attrs={"kernel_shape": [2, 2, 2],
                                                      "dilations": [2, 2, 2]}, opset=19)
    assert _matches_reference(model, {"x": x}, tmp_path)[0].shape == (1, 1, 3, 3, 3)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [2, 1, 2, 1]])
def test_max_pool_indices_output(order, pads, tmp_path):
    x = _rand(2, 3, 5, 4)
    model = _one_node("MaxPool", {"x": x}, outputs=2,
                      attrs={"kernel_shape": [3, 2], "strides": [2, 1], "pads": pads,
                             "storage_order": order})
    values, indices = _matches_reference(model, {"x": x}, tmp_path)
    flat = x.ravel() if order == 0 else x.transpose(0, 1, 3, 2).ravel()
    np.testing.assert_array_equal(flat[indices], values)


def test_max_pool_on_uint8(tmp_path):
    x = RNG.integers(0, 255, (1, 1, 5, 5)).astype(np.uint8)
    model = _one_node("MaxPool", {"x": x}, attrs={"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]})
    assert _matches_reference(model, {"x": x}, tmp_path)[0].dtype == np.uint8


# ----- ConvTranspose, Gemm, Conv in float16 --------------------------------------------

CONV_T = [
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 3]},
    {"output_shape": [10, 8], "strides": [3, 2]},
    {"output_shape": [10, 8], "strides": [3, 2], "output_padding": [1, 1]},
    {"pads": [1, 0, 2, 1], "strides": [2, 2], "output_padding": [1, 0]},
    {"pads": [0, 2, 0, 2], "strides": [1, 1], "dilations": [2, 1]},
]


@pytest.mark.parametrize("attrs", CONV_T, ids=[str(k) for k in range(len(CONV_T))])
def test_conv_transpose_output_geometry(attrs, tmp_path):
    x, w, b = _rand(1, 2, 3, 3), _rand(2, 3, 3, 3), _rand(3)
    model = _one_node("ConvTranspose", {"x": x, "w": w, "b": b}, attrs=attrs)
    _matches_reference(model, {"x": x, "w": w, "b": b}, tmp_path, atol=1e-5)
    _gradient_flows(model, {"x": x, "w": w, "b": b}, tmp_path)


@pytest.mark.parametrize("attrs", [{"pads": [3, 0, 2, 4]}, {"auto_pad": "SAME_LOWER",
                                                              "strides": [2, 2]}])
def test_conv_with_pads_beyond_half_the_kernel(attrs, tmp_path):
    feeds = {"x": _rand(1, 2, 5, 5), "w": _rand(3, 2, 2, 3)}
    model = _one_node("Conv", feeds, attrs=attrs)
    _matches_reference(model, feeds, tmp_path)
    _gradient_flows(model, feeds, tmp_path)


@pytest.mark.parametrize("bias_shape", [(1, 4), (3, 1), (4,)])
def test_gemm_with_a_broadcast_bias(bias_shape, tmp_path):
    feeds = {"a": _rand(3, 5), "b": _rand(4, 5), "c": _rand(*bias_shape)}
    model = _one_node("Gemm", feeds, attrs={"transB": 1})
    _matches_reference(model, feeds, tmp_path)


def test_conv_in_float16_runs_in_float32_and_keeps_float16(tmp_path):
    x, w = _rand(1, 2, 9, dtype=np.float16), _rand(3, 2, 3, dtype=np.float16)
    got = _matches_reference(_one_node("Conv", {"x": x, "w": w}), {"x": x, "w": w},
                             tmp_path, rtol=1e-2, atol=1e-2)
    assert got[0].dtype == np.float16


def test_bfloat16_einsum_and_celu_keep_bfloat16(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = _rand(2, 3, 4).astype(ml_dtypes.bfloat16)
    b = _rand(2, 4, 2).astype(ml_dtypes.bfloat16)
    model = _one_node("Einsum", {"a": a, "b": b}, attrs={"equation": "bij,bjk->bik"})
    got = _outputs(_load(model, tmp_path), {"a": a, "b": b})[0]
    assert got.dtype == a.dtype
    expected = np.einsum("bij,bjk->bik", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_allclose(got.astype(np.float32), expected, rtol=2e-2, atol=2e-2)
    got = _outputs(_load(_one_node("Celu", {"a": a}), tmp_path), {"a": a})[0]
    assert got.dtype == a.dtype


# ----- normalization --------------------------------------------------------------------

def test_batch_normalization_training_mode(tmp_path):
    feeds = {"x": _rand(4, 3, 2, 2), "s": _rand(3), "b": _rand(3), "m": _rand(3),
             "v": np.abs(_rand(3)) + 0.5}
    model = _one_node("BatchNormalization", feeds, outputs=3,
                      attrs={"training_mode": 1, "momentum": 0.8, "epsilon": 1e-3})
    _matches_reference(model, feeds, tmp_path)
    _gradient_flows(model, feeds, tmp_path)
    _gradient_flows(model, feeds, tmp_path, output=2)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_layer_normalization_mean_and_inv_std_dev(axis, tmp_path):
    feeds = {"x": _rand(2, 3, 4), "s": _rand(3, 4)[-1 if axis == -1 else slice(None)],
             "b": _rand(4)}
    if axis == 0:
        feeds["s"] = _rand(2, 3, 4)
    model = _one_node("LayerNormalization", feeds, outputs=3,
                      attrs={"axis": axis, "epsilon": 1e-3})
    _matches_reference(model, feeds, tmp_path)
    for output in (0, 2):
        _gradient_flows(model, feeds, tmp_path, output=output)


# ----- recurrent layers -----------------------------------------------------------------

def _recurrent_feeds(kind, dirs, hidden=3, steps=4, batch=2, features=5, layout=0):
    gates = {"GRU": 3, "LSTM": 4}[kind]
    feeds = {"x": _rand(*((batch, steps) if layout else (steps, batch)), features) * 0.5,
             "w": _rand(dirs, gates * hidden, features) * 0.4,
             "r": _rand(dirs, gates * hidden, hidden) * 0.4,
             "b": _rand(dirs, 2 * gates * hidden) * 0.2}
    return feeds


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru_linear_before_reset_0(direction, tmp_path):
    dirs = 2 if direction == "bidirectional" else 1
    feeds = _recurrent_feeds("GRU", dirs)
    feeds["h0"] = _rand(dirs, 2, 3)
    model = _one_node("GRU", feeds, outputs=2, order=["x", "w", "r", "b", "", "h0"],
                      attrs={"hidden_size": 3, "direction": direction})
    _matches_reference(model, feeds, tmp_path)
    _gradient_flows(model, feeds, tmp_path)


def test_lstm_with_peepholes_and_sequence_lengths(tmp_path):
    feeds = _recurrent_feeds("LSTM", 1)
    feeds["p"] = _rand(1, 9) * 0.3
    consts = {"lens": np.array([4, 2], np.int32)}
    model = _one_node("LSTM", feeds, consts, outputs=3, attrs={"hidden_size": 3},
                      order=["x", "w", "r", "b", "lens", "", "", "p"])
    _matches_onnxruntime(model, feeds, tmp_path)
    _gradient_flows(model, feeds, tmp_path, output=2)


def test_gru_batch_first_layout(tmp_path):
    feeds = _recurrent_feeds("GRU", 2, layout=1)
    feeds["h0"] = _rand(2, 2, 3)                 # layout 1: (batch, directions, hidden)
    model = _one_node("GRU", feeds, outputs=2, order=["x", "w", "r", "b", "", "h0"],
                      attrs={"hidden_size": 3, "layout": 1, "direction": "bidirectional"})
    _matches_reference(model, feeds, tmp_path)


def test_gru_clip(tmp_path):
    feeds = _recurrent_feeds("GRU", 1)
    feeds["x"] = feeds["x"] * 8                  # pre-activations beyond the clip
    model = _one_node("GRU", feeds, outputs=2, attrs={"hidden_size": 3, "clip": 0.5,
                                                      "linear_before_reset": 1})
    _matches_onnxruntime(model, feeds, tmp_path)


@pytest.mark.parametrize("attrs", [{"clip": 0.3}, {"activations": ["Sigmoid", "Relu"],
                                                 "direction": "bidirectional"}])
def test_rnn_clip_activations_and_sequence_lengths(attrs, tmp_path):
    dirs = 2 if attrs.get("direction") else 1
    feeds = {"x": _rand(4, 2, 5), "w": _rand(dirs, 3, 5), "r": _rand(dirs, 3, 3) * 0.5}
    model = _one_node("RNN", feeds, {"lens": np.array([3, 4], np.int32)}, outputs=2,
                      order=["x", "w", "r", "", "lens"], attrs={"hidden_size": 3, **attrs})
    _matches_onnxruntime(model, feeds, tmp_path)


def test_equal_sequence_lengths_shorter_than_the_input(tmp_path):
    feeds = _recurrent_feeds("LSTM", 1)
    model = _one_node("LSTM", feeds, {"lens": np.array([2, 2], np.int32)}, outputs=2,
                      order=["x", "w", "r", "b", "lens"], attrs={"hidden_size": 3})
    _matches_onnxruntime(model, feeds, tmp_path)


def test_unsupported_gate_activation_is_named(tmp_path):
    feeds = _recurrent_feeds("GRU", 1)
    model = _one_node("GRU", feeds, attrs={"hidden_size": 3,
                                           "activations": ["HardSigmoid", "Tanh"]})
    with pytest.raises(OnnxImportError, match="GRU activation 'HardSigmoid'"):
        _outputs(_load(model, tmp_path), feeds)


def test_lstm_input_forget_is_refused(tmp_path):
    feeds = _recurrent_feeds("LSTM", 1)
    model = _one_node("LSTM", feeds, attrs={"hidden_size": 3, "input_forget": 1})
    with pytest.raises(OnnxImportError, match="LSTM with input_forget"):
        _outputs(_load(model, tmp_path), feeds)


# ----- device arrays (the strict backend: CuPy's rules on NumPy memory) --------------------

def _device_cases():
    gru = _recurrent_feeds("GRU", 2)
    lstm = _recurrent_feeds("LSTM", 1)
    lstm["p"] = _rand(1, 9)
    return [
        ("AveragePool", {"x": _rand(1, 2, 7, 6)}, {}, POOLS[3][1], 1, None),
        ("MaxPool", {"x": _rand(1, 2, 7, 6)}, {}, POOLS[7][1], 1, None),
        ("LpPool", {"x": _rand(1, 2, 7, 6)}, {}, POOLS[8][1], 1, None),
        ("GRU", gru, {}, {"hidden_size": 3, "direction": "bidirectional"}, 2, None),
        ("LSTM", lstm, {"lens": np.array([4, 2], np.int32)}, {"hidden_size": 3}, 3,
         ["x", "w", "r", "b", "lens", "", "", "p"]),
        ("Pad", {"x": _rand(3, 4)}, {"p": np.array([1, 0, 0, 2]), "v": np.float32([2])}, {},
         1, None),
        ("Clip", {"x": _rand(5)}, {"lo": np.float32(-0.3), "hi": np.float32(0.4)}, {}, 1, None),
        ("CumSum", {"x": _rand(3, 4)}, {"a": np.array(1)}, {"exclusive": 1}, 1, None),
        ("ScatterElements", {"d": _rand(3, 4), "s": _rand(2, 3)},
         {"i": np.array([[1, 0, -1], [1, 1, 0]])}, {"reduction": "mul"}, 1, ["d", "i", "s"]),
        ("TopK", {"x": _rand(3, 5)}, {"k": np.array([2])}, {}, 2, None),
        ("LayerNormalization", {"x": _rand(2, 3, 4), "s": _rand(4)}, {}, {}, 3, None),
    ]


@pytest.mark.parametrize("case", _device_cases(), ids=lambda c: c[0])
def test_device_arrays_give_the_host_answer(case, tmp_path):
    from lezero import backends, cuda
    op, feeds, consts, attrs, outputs, order = case
    model = _one_node(op, feeds, consts, attrs=attrs, outputs=outputs, order=order,
                      opset=19)
    module = _load(model, tmp_path)
    expected = _outputs(module, feeds)
    strict = backends.get("strict")
    got = module(*[Variable(strict.from_host(v)) for v in feeds.values()])
    got = got if isinstance(got, tuple) else (got,)
    assert type(got[0].data).__name__ == "StrictArray"      # computed on the device
    for g, e in zip(got, expected):
        np.testing.assert_allclose(cuda.as_numpy(g.data), e, rtol=1e-6, atol=1e-7)
