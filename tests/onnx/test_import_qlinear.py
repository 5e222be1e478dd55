"""MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (lezero/onnx/import_qlinear.py):
one-node models imported by LeZero equal ONNX's reference evaluator exactly (integer
outputs), per-row / per-column / per-channel zero points and scales included; dtypes and
shapes LeZero does not compute raise an error naming the operator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from lezero.onnx.importer import OnnxImportError  # noqa: E402
from tests.onnx.test_import_new_ops import _compare, _load, _model  # noqa: E402

RNG = np.random.default_rng(3)


def _ints(dtype, *shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("with_zero_points", [True, False])
def test_matmul_integer_matches_reference(dtype, with_zero_points, tmp_path):
    a, b = _ints(dtype, 2, 4, 3), _ints(dtype, 3, 5)
    consts, order = {}, ["a", "b"]
    if with_zero_points:
        consts, order = {"azp": _ints(dtype), "bzp": _ints(dtype)}, order + ["azp", "bzp"]
    model = _model("MatMulInteger", {"a": a, "b": b}, {"_order": order}, opset=10,
                   consts=consts)
    (out,) = _compare(model, {"a": a, "b": b}, tmp_path, rtol=0, atol=0)
    if not with_zero_points:
        assert out.data.dtype == np.int32
        assert (out.data == a.astype(np.int64) @ b.astype(np.int64)).all()


def test_matmul_integer_per_row_and_column_zero_points_by_hand(tmp_path):
    """ONNX: a 1-D zero point of A runs along its rows, B's along its columns (the
    reference evaluator and onnxruntime take scalars only, so this is checked by hand)."""
    a, b = _ints(np.uint8, 2, 4, 3), _ints(np.uint8, 3, 5)
    azp, bzp = _ints(np.uint8, 4), _ints(np.uint8, 5)
    model = _model("MatMulInteger", {"a": a, "b": b}, {"_order": ["a", "b", "azp", "bzp"]},
                   opset=10, consts={"azp": azp, "bzp": bzp})
    expected = (a.astype(np.int64) - azp[:, None]) @ (b.astype(np.int64) - bzp)
    assert (_load(model, tmp_path)(a, b).data == expected).all()


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1]},
                                   {"strides": [2, 1], "dilations": [1, 2], "group": 2}])
def test_conv_integer_matches_reference(attrs, tmp_path):
    x, w = _ints(np.uint8, 1, 2, 5, 6), _ints(np.uint8, 4, 2 // attrs.get("group", 1), 2, 2)
    consts = {"xzp": np.array(7, np.uint8), "wzp": _ints(np.uint8, 4)}
    model = _model("ConvInteger", {"x": x, "w": w}, {**attrs, "_order": ["x", "w", "xzp",
                                                                         "wzp"]},
                   opset=10, consts=consts)
    (out,) = _compare(model, {"x": x, "w": w}, tmp_path, rtol=0, atol=0)
    assert out.data.dtype == np.int32


def test_conv_integer_by_hand(tmp_path):
    """A 1x1 kernel of 2 minus zero point 1, on x minus 3: 2 * (x - 3) - ... by hand."""
    x = np.arange(4, dtype=np.uint8).reshape(1, 1, 2, 2)
    w = np.array([[[[3]]]], np.uint8)
    model = _model("ConvInteger", {"x": x}, {"_order": ["x", "w", "xzp", "wzp"]}, opset=10,
                   consts={"w": w, "xzp": np.array(3, np.uint8), "wzp": np.array(1, np.uint8)})
    out = _load(model, tmp_path)(x)
    assert out.data.tolist() == [[[[-6, -4], [-2, 0]]]]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16])
def test_qlinear_matmul_matches_reference(dtype, scale_dtype, tmp_path):
    a, b = _ints(dtype, 2, 3, 4), _ints(dtype, 4, 3)
    consts = {"as": np.array(0.02, scale_dtype), "azp": np.array(3, dtype),
              "bs": np.array(0.01, scale_dtype), "bzp": np.array(1, dtype),
              "ys": np.array(0.05, scale_dtype), "yzp": np.array(5, dtype)}
    order = ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"]
    model = _model("QLinearMatMul", {"a": a, "b": b}, {"_order": order}, opset=21,
                   consts=consts)
    (out,) = _compare(model, {"a": a, "b": b}, tmp_path, rtol=0, atol=0)
    assert out.data.dtype == dtype


def test_qlinear_matmul_saturates_by_hand(tmp_path):
    a, b = np.array([[200, 10]], np.uint8), np.array([[1], [1]], np.uint8)
    consts = {"s": np.array(1.0, np.float32), "z": np.array(0, np.uint8),
              "ys": np.array(0.5, np.float32)}
    order = ["a", "s", "z", "b", "s", "z", "ys", "z"]
    model = _model("QLinearMatMul", {"a": a, "b": b}, {"_order": order}, opset=10,
                   consts=consts)
    assert _load(model, tmp_path)(a, b).data.tolist() == [[255]]     # 420 saturated
    b2 = np.array([[1], [0]], np.uint8)
    assert _load(model, tmp_path)(np.array([[3, 0]], np.uint8), b2).data.tolist() == [[6]]


@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_matches_reference(per_channel, tmp_path):
    x, w = _ints(np.uint8, 1, 2, 5, 5), _ints(np.int8, 3, 2, 3, 3)
    w_scale = np.array([0.01, 0.02, 0.005], np.float32) if per_channel else \
        np.array(0.01, np.float32)
    consts = {"xs": np.array(0.02, np.float32), "xzp": np.array(100, np.uint8), "w": w,
              "ws": w_scale, "wzp": np.zeros(3 if per_channel else (), np.int8),
              "ys": np.array(0.3, np.float32), "yzp": np.array(128, np.uint8),
              "bias": np.array([100, -200, 5], np.int32)}
    order = ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "bias"]
    model = _model("QLinearConv", {"x": x}, {"pads": [1, 1, 1, 1], "_order": order},
                   opset=10, consts=consts)
    (out,) = _compare(model, {"x": x}, tmp_path, rtol=0, atol=0)
    assert out.data.dtype == np.uint8 and out.shape == (1, 3, 5, 5)


@pytest.mark.parametrize("op, inputs, consts, order, why", [
    ("MatMulInteger", {"a": np.ones((2, 2), np.int32), "b": np.ones((2, 2), np.int32)}, {},
     ["a", "b"], "A has dtype int32"),
    ("MatMulInteger", {"a": np.ones((2, 3), np.uint8), "b": np.ones((3, 2), np.uint8)},
     {"azp": np.zeros(3, np.uint8)}, ["a", "b", "azp"], "A zero point of shape (3,)"),
    ("ConvInteger", {"x": np.ones((1, 1, 3, 3), np.uint8), "w": np.ones((1, 1, 2, 2),
                                                                        np.uint8)},
     {"xzp": np.zeros(2, np.uint8)}, ["x", "w", "xzp"], "x zero point must be a scalar"),
])
def test_bad_integer_inputs_name_the_operator(op, inputs, consts, order, why, tmp_path):
    model = _model(op, inputs, {"_order": order}, opset=10, consts=consts)
    with pytest.raises(OnnxImportError, match=f"{op}.*{why}".replace("(", r"\(")
                       .replace(")", r"\)")):
        _load(model, tmp_path)(*inputs.values())


def test_qlinear_conv_bad_bias_and_scale_are_errors(tmp_path):
    x, w = _ints(np.uint8, 1, 1, 3, 3), _ints(np.uint8, 2, 1, 1, 1)
    base = {"s": np.array(0.1, np.float32), "z": np.array(0, np.uint8), "w": w}
    order = ["x", "s", "z", "w", "ws", "z", "s", "z", "bias"]
    for ws, bias, why in [(np.ones(2, np.float32), np.zeros(3, np.int32), "bias must be int32"),
                          (np.ones(3, np.float32), np.zeros(2, np.int32), "w scale of shape"),
                          (np.array(1, np.int32), np.zeros(2, np.int32), "w scale has dtype")]:
        model = _model("QLinearConv", {"x": x}, {"_order": order}, opset=10,
                       consts={**base, "ws": ws, "bias": bias})
        with pytest.raises(OnnxImportError, match=f"QLinearConv: {why}"):
            _load(model, tmp_path)(x)
