"""LinearAttention, CausalConvWithState and TensorScatter (lezero/onnx/import_seq.py): each
one-node model imported by LeZero equals ONNX's reference evaluator; gradients through
the imported graph equal central differences; bad input names the operator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from lezero.onnx.importer import OnnxImportError  # noqa: E402
from tests.onnx.test_import_new_ops import _compare, _grad, _load, _model, _randn  # noqa: E402

OPSET = 27


def _la(rule, b=2, t=3, hq=2, hkv=2, dk=3, dv=2, past=False, decay_per_key=True,
        attrs=None):
    """A LinearAttention model and its inputs for ``rule``."""
    inputs = {"q": _randn(b, t, hq * dk), "k": _randn(b, t, hkv * dk) * 0.5,
              "v": _randn(b, t, hkv * dv)}
    order = ["q", "k", "v", "", "", ""]
    if past:
        inputs["s"] = _randn(b, hkv, dk, dv) * 0.1
        order[3] = "s"
    if "gated" in rule:
        width = hkv * dk if decay_per_key else hkv
        inputs["g"] = -np.abs(_randn(b, t, width)) * 0.3
        order[4] = "g"
    if "delta" in rule:
        inputs["beta"] = np.abs(_randn(b, t, hkv)) * 0.5
        order[5] = "beta"
    while order[-1] == "":
        order.pop()
    node_attrs = {"update_rule": rule, "q_num_heads": hq, "kv_num_heads": hkv,
                  "_order": order, **(attrs or {})}
    return _model("LinearAttention", inputs, node_attrs, n_out=2, opset=OPSET), inputs


@pytest.mark.parametrize("rule,kw", [
    ("linear", {}), ("gated", {}), ("gated", {"decay_per_key": False}), ("delta", {}),
    ("gated_delta", {"past": True}), ("gated_delta", {"hq": 4, "hkv": 2}),
    ("linear", {"attrs": {"scale": 0.25}, "t": 1}),
])
def test_linear_attention_matches_reference(rule, kw, tmp_path):
    model, inputs = _la(rule, **kw)
    out, state = _compare(model, inputs, tmp_path, rtol=1e-4, atol=1e-5)
    assert out.shape == (2, kw.get("t", 3), kw.get("hq", 2) * 2)
    assert state.shape == (2, kw.get("hkv", 2), 3, 2)


def test_linear_attention_linear_rule_by_hand(tmp_path):
    """One head, d_k = d_v = 1: the state is the running sum of k*v, out = q*S/1."""
    q = np.array([[[1.0], [2.0], [3.0]]], np.float32)
    k = np.array([[[1.0], [1.0], [2.0]]], np.float32)
    v = np.array([[[2.0], [3.0], [1.0]]], np.float32)
    model = _model("LinearAttention", {"q": q, "k": k, "v": v},
                   {"update_rule": "linear", "q_num_heads": 1, "kv_num_heads": 1},
                   n_out=2, opset=OPSET)
    out, state = _load(model, tmp_path)(q, k, v)
    np.testing.assert_allclose(out.data.reshape(-1), [2.0, 10.0, 21.0])
    np.testing.assert_allclose(state.data.reshape(-1), [7.0])


def test_linear_attention_float16_keeps_dtypes(tmp_path):
    model, inputs = _la("gated_delta")
    inputs = {n: a.astype(np.float16) for n, a in inputs.items()}
    model = _la("gated_delta")[0]
    for vi in model.graph.input:
        vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    out, state = _compare(model, inputs, tmp_path, rtol=2e-3, atol=2e-3)
    assert out.dtype == np.float16 and state.dtype == np.float16


@pytest.mark.parametrize("rule", ["gated_delta", "linear"])
def test_linear_attention_gradient(rule, tmp_path):
    model, inputs = _la(rule, b=1, t=2, past=True)
    _grad(model, inputs, tmp_path)


@pytest.mark.parametrize("change,message", [
    ({"update_rule": "softmax"}, "update_rule"),
    ({"q_num_heads": 3}, "multiple"),
])
def test_linear_attention_bad_attributes(change, message, tmp_path):
    model, inputs = _la("linear", attrs=change)
    with pytest.raises(OnnxImportError, match=f"LinearAttention.*{message}"):
        _load(model, tmp_path)(*inputs.values())


def test_linear_attention_missing_decay_is_an_error(tmp_path):
    model, inputs = _la("linear", attrs={"update_rule": "gated"})
    with pytest.raises(OnnxImportError, match="requires the decay input"):
        _load(model, tmp_path)(*inputs.values())


# ----- CausalConvWithState -------------------------------------------------------------

def _conv(k=3, length=5, bias=False, past=False, activation=None, dtype=np.float32):
    inputs = {"x": _randn(2, 3, length, dtype=dtype), "w": _randn(3, 1, k, dtype=dtype)}
    order = ["x", "w", "", ""]
    if bias:
        inputs["b"], order[2] = _randn(3, dtype=dtype), "b"
    if past:
        inputs["s"], order[3] = _randn(2, 3, k - 1, dtype=dtype), "s"
    while order[-1] == "":
        order.pop()
    attrs = {"_order": order, **({"activation": activation} if activation else {})}
    return _model("CausalConvWithState", inputs, attrs, n_out=2, opset=OPSET), inputs


@pytest.mark.parametrize("kw", [{}, {"bias": True, "past": True}, {"activation": "silu"},
                                {"k": 1}, {"k": 4, "length": 2}, {"dtype": np.float16}])
def test_causal_conv_matches_reference(kw, tmp_path):
    model, inputs = _conv(**kw)
    tol = 2e-3 if kw.get("dtype") == np.float16 else 1e-5
    out, state = _compare(model, inputs, tmp_path, rtol=tol, atol=tol)
    assert state.shape == (2, 3, kw.get("k", 3) - 1)


def test_causal_conv_by_hand(tmp_path):
    """Taps (1, 2) on [1, 2, 3] after the past value 10: y_t = x_{t-1} + 2 x_t."""
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    w = np.array([[[1.0, 2.0]]], np.float32)
    s = np.array([[[10.0]]], np.float32)
    model = _model("CausalConvWithState", {"x": x, "w": w, "s": s},
                   {"_order": ["x", "w", "", "s"]}, n_out=2, opset=OPSET)
    out, state = _load(model, tmp_path)(x, w, s)
    np.testing.assert_allclose(out.data.reshape(-1), [12.0, 5.0, 8.0])
    np.testing.assert_allclose(state.data.reshape(-1), [3.0])


def test_causal_conv_gradient(tmp_path):
    model, inputs = _conv(bias=True, past=True, activation="swish")
    _grad(model, inputs, tmp_path)


def test_causal_conv_errors(tmp_path):
    model, inputs = _conv(activation="relu")
    with pytest.raises(OnnxImportError, match="CausalConvWithState.*activation"):
        _load(model, tmp_path)(*inputs.values())
    model, inputs = _conv(past=True)
    with pytest.raises(OnnxImportError, match="past_state has shape"):
        _load(model, tmp_path)(inputs["x"], inputs["w"], inputs["s"][:, :, :1])


# ----- TensorScatter -------------------------------------------------------------------

def _scatter(mode, starts, axis=-2, cache=(2, 2, 5, 3), length=2):
    update_shape = list(cache)
    update_shape[axis] = length
    inputs = {"c": _randn(*cache), "u": _randn(*update_shape),
              "i": np.asarray(starts, np.int64)}
    attrs = {"mode": mode, "axis": axis}
    return _model("TensorScatter", inputs, attrs, opset=24), inputs


@pytest.mark.parametrize("mode,starts,axis", [
    ("linear", [1, 2], -2), ("circular", [3, 2], -2), ("linear", [0, 1], 1),
    ("circular", [4, 0], 3)])
def test_tensor_scatter_matches_reference(mode, starts, axis, tmp_path):
    model, inputs = _scatter(mode, starts, axis=axis, cache=(2, 3, 4, 5))
    _compare(model, inputs, tmp_path)


def test_tensor_scatter_circular_by_hand(tmp_path):
    """Three slots, two updates from slot 2: the second wraps round to slot 0."""
    cache = np.zeros((1, 3, 1), np.float32)
    update = np.array([[[7.0], [8.0]]], np.float32)
    model = _model("TensorScatter", {"c": cache, "u": update,
                                     "i": np.array([2], np.int64)},
                   {"mode": "circular", "axis": 1}, opset=24)
    out = _load(model, tmp_path)(cache, update, np.array([2], np.int64))
    np.testing.assert_array_equal(out.data.reshape(-1), [8.0, 0.0, 7.0])


def test_tensor_scatter_gradient(tmp_path):
    model, inputs = _scatter("circular", [4, 1])
    module = _load(model, tmp_path)
    from lezero.testing import check_gradient
    check_gradient(lambda c, u: module(c, u, inputs["i"]), inputs["c"], inputs["u"])


def test_tensor_scatter_overrun_is_an_error(tmp_path):
    model, inputs = _scatter("linear", [4, 0])
    with pytest.raises(OnnxImportError, match="TensorScatter.*overruns"):
        _load(model, tmp_path)(*inputs.values())
    model, inputs = _scatter("linear", [0, 0], axis=0)
    with pytest.raises(OnnxImportError, match="TensorScatter: axis"):
        _load(model, tmp_path)(*inputs.values())
