"""The ONNX operators added for exported models (Mod, ScatterND, CastLike, BitShift,
RMSNormalization, LRN, the two losses, Resize, Attention, Quantize/DequantizeLinear): each
one-node model imported by LeZero equals ONNX's reference evaluator on the same file; the
differentiable ones pass a float64 gradient check through the imported graph; what is not
supported raises an error naming the operator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

from lezero.core import Variable  # noqa: E402
from lezero.onnx import load  # noqa: E402
from lezero.onnx.importer import OnnxImportError  # noqa: E402
from lezero.testing import check_gradient  # noqa: E402

h = onnx.helper
RNG = np.random.default_rng(0)


def _randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _model(op, inputs, attrs=None, n_out=1, opset=23, consts=None):
    """A one-node model: ``inputs`` are graph inputs ({name: array}), ``consts``
    initializers; empty names in ``order`` stand for omitted optional inputs."""
    consts = consts or {}
    order = list(inputs) + list(consts)
    order = attrs.pop("_order", order) if attrs else order
    outs = [f"y{k}" for k in range(n_out)]
    node = h.make_node(op, order, outs, **(attrs or {}))
    vi = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in inputs.items()]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in consts.items()]
    out_vi = [h.make_tensor_value_info(o, 0, None) for o in outs]
    graph = h.make_graph([node], "g", vi, out_vi, initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _load(model, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return load(str(path))


def _compare(model, inputs, tmp_path, rtol=1e-5, atol=1e-6):
    """LeZero's outputs equal the reference evaluator's (dtype, shape and values)."""
    expected = ReferenceEvaluator(model).run(None, inputs)
    got = _load(model, tmp_path)(*inputs.values())
    got = got if isinstance(got, tuple) else (got,)
    for k, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g.data)
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {k}: {g.dtype}{g.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return got


def _grad(model, inputs, tmp_path):
    """Backward through the imported graph equals central differences (float64)."""
    module = _load(model, tmp_path)

    def fn(*xs):
        out = module(*xs)
        return out[0] if isinstance(out, tuple) else out
    check_gradient(fn, *inputs.values(), rtol=1e-4, atol=1e-6)


# ----- Mod, ScatterND, CastLike, BitShift ----------------------------------------------

@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integers_python_and_c_style(fmod, tmp_path):
    a = np.array([-7, -3, 5, 9, 8], np.int64)
    b = np.array([3, -2, -3, 4, 2], np.int64)
    got = _compare(_model("Mod", {"a": a, "b": b}, {"fmod": fmod}), {"a": a, "b": b},
                   tmp_path)[0]
    assert got.data.tolist() == (np.fmod(a, b) if fmod else np.mod(a, b)).tolist()


def test_mod_float_value_and_gradient(tmp_path):
    a, b = _randn(3, 4) * 5, np.abs(_randn(3, 4)) + 0.5
    _compare(_model("Mod", {"a": a, "b": b}, {"fmod": 1}), {"a": a, "b": b}, tmp_path)
    a64, b64 = a.astype(np.float64) + 0.01, b.astype(np.float64)
    _grad(_model("Mod", {"a": a64, "b": b64}, {"fmod": 1}), {"a": a64, "b": b64}, tmp_path)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction, tmp_path):
    data = _randn(4, 3, 2)
    idx = np.array([[1], [3], [1]], np.int64) if reduction != "none" else \
        np.array([[1, 2], [3, 0]], np.int64)
    upd = _randn(*(idx.shape[:1] + data.shape[idx.shape[1]:]))
    model = _model("ScatterND", {"data": data, "upd": upd}, {"reduction": reduction,
                   "_order": ["data", "idx", "upd"]}, consts={"idx": idx}, opset=18)
    _compare(model, {"data": data, "upd": upd}, tmp_path)
    d64, u64 = data.astype(np.float64), upd.astype(np.float64)
    model = _model("ScatterND", {"data": d64, "upd": u64}, {"reduction": reduction,
                   "_order": ["data", "idx", "upd"]}, consts={"idx": idx}, opset=18)
    _grad(model, {"data": d64, "upd": u64}, tmp_path)


def test_scatter_nd_on_constant_integers(tmp_path):
    data = np.arange(12, dtype=np.int64).reshape(3, 4)
    idx, upd = np.array([[0, 1], [2, 3]], np.int64), np.array([-1, -2], np.int64)
    _compare(_model("ScatterND", {"data": data, "idx": idx, "upd": upd}),
             {"data": data, "idx": idx, "upd": upd}, tmp_path)


def test_cast_like_keeps_the_gradient(tmp_path):
    x, like = _randn(2, 3), np.zeros(1, np.float64)
    _compare(_model("CastLike", {"x": x, "like": like}), {"x": x, "like": like}, tmp_path)
    like16 = np.zeros(1, np.float16)
    _compare(_model("CastLike", {"x": x, "like": like16}), {"x": x, "like": like16},
             tmp_path)
    ints = np.zeros(1, np.int32)
    _compare(_model("CastLike", {"x": x * 4, "like": ints}), {"x": x * 4, "like": ints},
             tmp_path)
    module = _load(_model("CastLike", {"x": x}, {"_order": ["x", "like"]},
                          consts={"like": np.zeros(1, np.float64)}), tmp_path)
    v = Variable(x)
    y = module(v)
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert v.grad.dtype == np.float32
    np.testing.assert_allclose(v.grad.data, 2 * x, rtol=1e-6)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_bit_shift(direction, dtype, tmp_path):
    x = np.array([1, -4, 100, 7, -128, 3], dtype=np.int64).astype(dtype)
    s = np.array([1, 2, 3, 8, 1, 9], dtype=np.int64).astype(dtype)
    _compare(_model("BitShift", {"x": x, "s": s}, {"direction": direction}),
             {"x": x, "s": s}, tmp_path)


# ----- normalizations and losses -----------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization(axis, tmp_path):
    x, scale = _randn(2, 3, 4), _randn(*((4,) if axis == -1 else (3, 4)))
    attrs = {"axis": axis, "epsilon": 1e-3}
    _compare(_model("RMSNormalization", {"x": x, "s": scale}, dict(attrs)),
             {"x": x, "s": scale}, tmp_path)
    x64, s64 = x.astype(np.float64), scale.astype(np.float64)
    _grad(_model("RMSNormalization", {"x": x64, "s": s64}, dict(attrs)),
          {"x": x64, "s": s64}, tmp_path)


def _lrn_reference(x, size, alpha, beta, bias):
    """LRN as the ONNX spec states it (onnx's reference evaluator loops over the batch
    axis instead of the channels, so it is wrong whenever N != C)."""
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    sq = np.zeros_like(x)
    for c in range(x.shape[1]):
        sq[:, c] = (x[:, max(0, c - before):c + after + 1] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


@pytest.mark.parametrize("size", [3, 4])
def test_lrn_odd_and_even_window(size, tmp_path):
    x = _randn(2, 5, 3, 3)
    attrs = {"size": size, "alpha": 0.3, "beta": 0.6, "bias": 1.5}
    got = _load(_model("LRN", {"x": x}, dict(attrs), opset=13), tmp_path)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.data, _lrn_reference(x, **attrs), rtol=1e-5, atol=1e-6)
    x64 = x.astype(np.float64)
    _grad(_model("LRN", {"x": x64}, dict(attrs), opset=13), {"x": x64}, tmp_path)


LOSS_CASES = [({"reduction": "mean"}, False), ({"reduction": "sum"}, True),
              ({"reduction": "none", "ignore_index": 1}, False),
              ({"reduction": "mean", "ignore_index": 2}, True)]


@pytest.mark.parametrize("attrs,weighted", LOSS_CASES)
@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_losses(op, attrs, weighted, tmp_path):
    x = _randn(3, 4, 2)
    target = np.array([[0, 1], [2, 3], [1, 2]], np.int64)
    consts = {"t": target}
    if weighted:
        consts["w"] = np.array([0.5, 1.0, 2.0, 0.25], np.float32)
    n_out = 2 if op == "SoftmaxCrossEntropyLoss" else 1
    _compare(_model(op, {"x": x}, dict(attrs), n_out=n_out, consts=consts), {"x": x},
             tmp_path)
    x64 = x.astype(np.float64)
    if weighted:
        consts["w"] = consts["w"].astype(np.float64)
    _grad(_model(op, {"x": x64}, dict(attrs), consts=consts), {"x": x64}, tmp_path)


def test_loss_weight_parameter_gets_a_gradient(tmp_path):
    x = _randn(3, 4)
    consts = {"t": np.array([0, 3, 1], np.int64), "w": np.array([1, 2, 3, 4], np.float32)}
    module = _load(_model("NegativeLogLikelihoodLoss", {"x": x}, consts=consts), tmp_path)
    loss = module(x)
    loss.backward()
    weight = dict(module.named_parameters())["w"]
    assert weight.grad is not None and np.abs(weight.grad.data).sum() > 0


# ----- Resize ---------------------------------------------------------------------------------

RESIZE_CASES = [
    ({"mode": "nearest"}, "scales", [1, 1, 2.0, 1.5]),
    ({"mode": "nearest", "nearest_mode": "floor",
      "coordinate_transformation_mode": "asymmetric"}, "scales", [1, 1, 0.5, 2.0]),
    ({"mode": "nearest", "nearest_mode": "ceil",
      "coordinate_transformation_mode": "align_corners"}, "sizes", [1, 2, 7, 3]),
    ({"mode": "linear"}, "scales", [1, 1, 1.5, 0.75]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
     "sizes", [1, 2, 3, 1]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, "sizes",
     [1, 2, 5, 7]),
    ({"mode": "linear", "antialias": 1}, "scales", [1, 1, 0.6, 0.5]),
    ({"mode": "cubic"}, "scales", [1, 1, 2.0, 0.8]),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, "sizes", [1, 2, 6, 3]),
    ({"mode": "cubic", "antialias": 1}, "sizes", [1, 2, 3, 2]),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
     "scales", [1, 1, 1.7, 0.6]),
]


def _resize_model(attrs, kind, values, x, dtype=np.float32):
    consts = {"scales": np.array(values, np.float32)} if kind == "scales" else \
        {"sizes": np.array(values, np.int64)}
    order = ["x", "", "scales"] if kind == "scales" else ["x", "", "", "sizes"]
    return _model("Resize", {"x": x}, dict(attrs, _order=order), consts=consts, opset=19)


@pytest.mark.parametrize("attrs,kind,values", RESIZE_CASES)
def test_resize(attrs, kind, values, tmp_path):
    x = _randn(1, 2, 4, 4)
    _compare(_resize_model(attrs, kind, values, x), {"x": x}, tmp_path)


def test_resize_crop_and_resize_extrapolates(tmp_path):
    x = _randn(1, 1, 4, 4)
    consts = {"roi": np.array([0, 0, -0.2, 0.3, 1, 1, 0.7, 1.4], np.float32),
              "sizes": np.array([1, 1, 3, 3], np.int64)}
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 9.0, "_order": ["x", "roi", "", "sizes"]}
    got = _compare(_model("Resize", {"x": x}, attrs, consts=consts, opset=19), {"x": x},
                   tmp_path)[0]
    assert (got.data == 9.0).any()


def test_resize_uint8_and_gradient(tmp_path):
    x = (RNG.uniform(0, 255, (1, 1, 3, 3))).astype(np.uint8)
    _compare(_resize_model({"mode": "linear"}, "scales", [1, 1, 2, 2], x), {"x": x}, tmp_path,
             atol=1)
    x64 = _randn(1, 1, 3, 3, dtype=np.float64)
    for attrs in ({"mode": "linear"}, {"mode": "nearest"}):
        model = _resize_model(attrs, "sizes", [1, 1, 6, 4], x64)   # no float constant
        _grad(model, {"x": x64}, tmp_path)


def test_resize_unsupported_combination_is_a_clear_error(tmp_path):
    x = _randn(1, 1, 2, 2)
    model = _resize_model({"mode": "nearest", "antialias": 1}, "scales", [1, 1, 2, 2], x)
    with pytest.raises(OnnxImportError, match="Resize: antialias"):
        _load(model, tmp_path)(x)
    model = _resize_model({"mode": "nearest", "nearest_mode": "banker"}, "scales",
                          [1, 1, 2, 2], x)
    with pytest.raises(OnnxImportError, match="nearest_mode='banker'"):
        _load(model, tmp_path)(x)


# ----- Attention ------------------------------------------------------------------------------

def _attention_inputs(q_heads=2, kv_heads=2, q_len=3, kv_len=5, dtype=np.float32):
    return {"q": _randn(2, q_heads, q_len, 4, dtype=dtype),
            "k": _randn(2, kv_heads, kv_len, 4, dtype=dtype),
            "v": _randn(2, kv_heads, kv_len, 6, dtype=dtype)}


ATTENTION_CASES = [
    ({}, {}, 23),
    ({"is_causal": 1, "scale": 0.3}, {}, 23),
    ({"softcap": 2.0}, {"q_heads": 4}, 23),                    # grouped-query attention
    ({"is_causal": 1, "left_window_size": 1}, {}, 25),         # a sliding window
]


@pytest.mark.parametrize("attrs,shape,opset", ATTENTION_CASES)
def test_attention(attrs, shape, opset, tmp_path):
    inputs = _attention_inputs(**shape)
    _compare(_model("Attention", inputs, dict(attrs), opset=opset), inputs, tmp_path,
             rtol=1e-4)
    inputs64 = {k: v.astype(np.float64) for k, v in inputs.items()}
    _grad(_model("Attention", inputs64, dict(attrs), opset=opset), inputs64, tmp_path)


def test_attention_masks_past_cache_and_qk_output(tmp_path):
    inputs = _attention_inputs()
    mask = RNG.uniform(size=(3, 7)) > 0.3
    mask[0] = False                                            # a fully masked row: zeros
    inputs.update(mask=mask, pk=_randn(2, 2, 2, 4), pv=_randn(2, 2, 2, 6))
    for mode in (0, 2, 3):
        model = _model("Attention", inputs, {"qk_matmul_output_mode": mode,
                       "_order": ["q", "k", "v", "mask", "pk", "pv"]}, n_out=4)
        y, present_k, _, qk = _compare(model, inputs, tmp_path, rtol=1e-4)
        assert present_k.shape == (2, 2, 7, 4) and qk.shape == (2, 2, 3, 7)
        assert not np.asarray(y.data)[:, :, 0].any()


def test_attention_3d_inputs_and_float_mask(tmp_path):
    inputs = {"q": _randn(2, 3, 8), "k": _randn(2, 5, 8), "v": _randn(2, 5, 4),
              "mask": _randn(2, 1, 3, 5)}
    model = _model("Attention", inputs, {"q_num_heads": 2, "kv_num_heads": 2})
    _compare(model, inputs, tmp_path, rtol=1e-4)


def test_attention_integer_inputs_are_refused(tmp_path):
    inputs = _attention_inputs()
    model = _model("Attention", inputs)
    module = _load(model, tmp_path)
    with pytest.raises(OnnxImportError, match="Attention: Q of dtype int32"):
        module(*(v.astype(np.int32) for v in inputs.values()))


# ----- QuantizeLinear / DequantizeLinear ------------------------------------------------------

QUANT_CASES = [
    ({}, (), np.uint8), ({}, (), np.int8),
    ({"axis": 1}, (3,), np.uint8), ({"axis": 0}, (2,), np.int16),
    ({"axis": 1, "block_size": 2}, (2, 2, 4), np.int8),
]


@pytest.mark.parametrize("attrs,scale_shape,dtype", QUANT_CASES)
def test_quantize_dequantize(attrs, scale_shape, dtype, tmp_path):
    x = _randn(2, 3, 4) * 3
    scale = (np.abs(_randn(*scale_shape)) * 0.05 + 0.01).astype(np.float32)
    zero = np.full(scale_shape, 3, dtype=dtype)
    q = _compare(_model("QuantizeLinear", {"x": x, "s": scale, "z": zero}, dict(attrs)),
                 {"x": x, "s": scale, "z": zero}, tmp_path)[0]
    qd = np.asarray(q.data)
    assert qd.dtype == dtype and qd.min() >= np.iinfo(dtype).min
    _compare(_model("DequantizeLinear", {"q": qd, "s": scale, "z": zero}, dict(attrs)),
             {"q": qd, "s": scale, "z": zero}, tmp_path)


def test_dequantize_scale_parameter_gets_a_gradient(tmp_path):
    q = np.array([[0, 10, 255], [3, 4, 5]], np.uint8)
    model = _model("DequantizeLinear", {"q": q}, {"axis": 1, "_order": ["q", "s", "z"]},
                   consts={"s": np.array([0.5, 1.0, 2.0], np.float32),
                           "z": np.array([1, 2, 3], np.uint8)})
    module = _load(model, tmp_path)
    y = module(q)
    np.testing.assert_allclose(y.data, (q.astype(np.float32) - [1, 2, 3]) * [0.5, 1, 2])
    y.sum().backward()
    np.testing.assert_allclose(dict(module.named_parameters())["s"].grad.data,
                               (q.astype(np.float32) - [1, 2, 3]).sum(axis=0))


def test_dynamic_quantize_linear(tmp_path):
    x = _randn(3, 4)
    _compare(_model("DynamicQuantizeLinear", {"x": x}, n_out=3, opset=11), {"x": x}, tmp_path)


@pytest.mark.parametrize("code,name", [(onnx.TensorProto.INT4, "INT4"),
                                       (onnx.TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN")])
def test_quantize_to_narrow_types_is_a_clear_error(code, name, tmp_path):
    x, scale = _randn(4), np.float32(0.1)
    model = _model("QuantizeLinear", {"x": x}, {"output_dtype": code, "_order": ["x", "s"]},
                   consts={"s": np.asarray(scale)})
    with pytest.raises(OnnxImportError, match=f"QuantizeLinear: output_dtype {name} is not"):
        _load(model, tmp_path)(x)


# ----- clear errors ---------------------------------------------------------------------------

def test_unsupported_inputs_name_the_operator(tmp_path):
    x = _randn(3)
    with pytest.raises(OnnxImportError, match="BitShift: inputs must be integers"):
        _load(_model("BitShift", {"a": x, "b": x}, {"direction": "LEFT"}), tmp_path)(x, x)
    data, upd = _randn(4, 2), _randn(1, 2)
    model = _model("ScatterND", {"d": data, "u": upd}, {"_order": ["d", "i", "u"]},
                   consts={"i": np.array([[7]], np.int64)})
    with pytest.raises(OnnxImportError, match="ScatterND: an index lies outside"):
        _load(model, tmp_path)(data, upd)
    logits, target = _randn(2, 3), np.array([0, 5], np.int64)
    model = _model("NegativeLogLikelihoodLoss", {"x": logits, "t": target})
    with pytest.raises(OnnxImportError, match="a target lies outside"):
        _load(model, tmp_path)(logits, target)
