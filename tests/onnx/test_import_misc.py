"""BitCast, AffineGrid, Upsample, MaxUnpool, MelWeightMatrix and Binarizer
(lezero/onnx/import_misc.py): one-node models imported by LeZero equal ONNX's reference
evaluator (or hand values); AffineGrid, Upsample and MaxUnpool pass a gradient check;
unsupported input raises an error naming the operator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from lezero.onnx.import_ops import IMPORT_OPS  # noqa: E402
from lezero.onnx.importer import OnnxImportError  # noqa: E402
from lezero.testing import check_gradient  # noqa: E402
from tests.onnx.test_import_new_ops import _compare, _grad, _load, _model, _randn  # noqa: E402

TP = onnx.TensorProto


@pytest.mark.parametrize("x,to", [
    (np.array([1.0, -2.5, 3.75], np.float32), TP.INT32),
    (np.array([[1, -7]], np.int64), TP.DOUBLE),
    (np.array([-1, -128, 127], np.int8), TP.UINT8),
    (np.array(1.0, np.float32), TP.UINT32),
    (np.array([1, 32768], np.uint16), TP.FLOAT16),
])
def test_bitcast_matches_reference(x, to, tmp_path):
    (out,) = _compare(_model("BitCast", {"x": x}, {"to": to}, opset=26), {"x": x},
                      tmp_path, rtol=0, atol=0)
    assert out.shape == x.shape


def test_bitcast_float_one_is_its_ieee_pattern(tmp_path):
    x = np.array([1.0], np.float32)
    out = _load(_model("BitCast", {"x": x}, {"to": TP.INT32}, opset=26), tmp_path)(x)
    assert out.data.tolist() == [0x3F800000]


@pytest.mark.parametrize("to,message", [(TP.INT64, "differ in width"),
                                        (TP.STRING, "not supported")])
def test_bitcast_errors(to, message, tmp_path):
    x = np.ones(2, np.float32)
    with pytest.raises(OnnxImportError, match=f"BitCast.*{message}"):
        _load(_model("BitCast", {"x": x}, {"to": to}, opset=26), tmp_path)(x)


# ----- AffineGrid ----------------------------------------------------------------------

@pytest.mark.parametrize("size,align", [((2, 1, 3, 4), 0), ((2, 1, 3, 4), 1),
                                        ((1, 2, 2, 3, 4), 0), ((1, 2, 2, 3, 4), 1)])
def test_affine_grid_matches_reference(size, align, tmp_path):
    k = len(size) - 2
    inputs = {"theta": _randn(size[0], k, k + 1),
              "size": np.array(size, np.int64)}
    (grid,) = _compare(_model("AffineGrid", inputs, {"align_corners": align}, opset=20),
                       inputs, tmp_path)
    assert grid.shape == (size[0], *size[2:], k)


def test_affine_grid_identity_by_hand(tmp_path):
    """The identity transform gives pixel centres: x along W, y along H."""
    theta = np.array([[[1.0, 0, 0], [0, 1.0, 0]]], np.float32)
    size = np.array([1, 1, 1, 2], np.int64)
    grid = _load(_model("AffineGrid", {"t": theta, "s": size}, opset=20), tmp_path)(
        theta, size)
    np.testing.assert_allclose(grid.data, [[[[-0.5, 0.0], [0.5, 0.0]]]])


def test_affine_grid_gradient(tmp_path):
    inputs = {"theta": _randn(2, 2, 3)}
    model = _model("AffineGrid", inputs, opset=20,
                   consts={"size": np.array([2, 1, 2, 3], np.int64)})
    _grad(model, inputs, tmp_path)


def test_affine_grid_bad_theta(tmp_path):
    inputs = {"theta": _randn(2, 3, 3), "size": np.array([2, 1, 3, 4], np.int64)}
    with pytest.raises(OnnxImportError, match="AffineGrid: theta"):
        _load(_model("AffineGrid", inputs, opset=20), tmp_path)(*inputs.values())


# ----- Upsample ------------------------------------------------------------------------

def test_upsample_matches_reference(tmp_path):
    inputs = {"x": _randn(1, 2, 2, 3), "scales": np.array([1, 1, 2, 3], np.float32)}
    (y,) = _compare(_model("Upsample", inputs, {"mode": "nearest"}, opset=9), inputs,
                    tmp_path)
    assert y.shape == (1, 2, 4, 9)


def test_upsample_linear_by_hand(tmp_path):
    """Asymmetric coordinates x_in = x_out / 2, the last tap repeating the edge (the
    reference evaluator does not implement linear Upsample)."""
    inputs = {"x": np.array([[[[1.0, 2.0]]]], np.float32),
              "scales": np.array([1, 1, 1, 2], np.float32)}
    y = _load(_model("Upsample", inputs, {"mode": "linear"}, opset=9), tmp_path)(
        *inputs.values())
    np.testing.assert_allclose(y.data, [[[[1.0, 1.5, 2.0, 2.0]]]])


def test_upsample_nearest_by_hand_and_gradient(tmp_path):
    x = np.array([[[[1.0, 2.0]]]], np.float32)
    model = _model("Upsample", {"x": x}, {"mode": "nearest"}, opset=9,
                   consts={"scales": np.array([1, 1, 2, 2], np.float32)})
    y = _load(model, tmp_path)(x)
    np.testing.assert_array_equal(y.data, [[[[1, 1, 2, 2], [1, 1, 2, 2]]]])
    module = _load(model, tmp_path).double()      # the float scales become a Parameter
    check_gradient(lambda v: module(v), x)


def test_upsample_bad_mode(tmp_path):
    inputs = {"x": _randn(1, 1, 2, 2), "scales": np.array([1, 1, 2, 2], np.float32)}
    with pytest.raises(OnnxImportError, match="Upsample: mode 'cubic'"):
        _load(_model("Upsample", inputs, {"mode": "cubic"}, opset=9), tmp_path)(
            *inputs.values())


# ----- MaxUnpool -----------------------------------------------------------------------

def _unpool(shape=None):
    inputs = {"x": np.array([[[[5, 6], [7, 8]]]], np.float32),
              "i": np.array([[[[5, 7], [13, 15]]]], np.int64)}
    if shape is not None:
        inputs["shape"] = np.array(shape, np.int64)
    model = _model("MaxUnpool", inputs, {"kernel_shape": [2, 2], "strides": [2, 2]},
                   opset=11)
    return model, inputs


@pytest.mark.parametrize("shape", [None, (1, 1, 5, 5)])
def test_max_unpool_matches_reference(shape, tmp_path):
    model, inputs = _unpool(shape)
    (y,) = _compare(model, inputs, tmp_path)
    assert y.data.sum() == 26


def test_max_unpool_smaller_output_shape_crops(tmp_path):
    """Values land in the inferred 4x4 output, whose top-left 3x3 is kept."""
    model, inputs = _unpool((1, 1, 3, 3))
    y = _load(model, tmp_path)(*inputs.values())
    expected = np.zeros((1, 1, 3, 3), np.float32)
    expected[0, 0, 1, 1] = 5
    np.testing.assert_array_equal(y.data, expected)


def test_max_unpool_gradient(tmp_path):
    x = _randn(1, 1, 2, 2)
    model = _model("MaxUnpool", {"x": x}, {"kernel_shape": [2, 2], "strides": [2, 2]},
                   opset=11, consts={"i": np.array([[[[0, 3], [9, 14]]]], np.int64)})
    _grad(model, {"x": x}, tmp_path)


def test_max_unpool_index_out_of_range(tmp_path):
    model, inputs = _unpool()
    inputs["i"] = inputs["i"] + 16
    with pytest.raises(OnnxImportError, match="MaxUnpool: an index"):
        _load(model, tmp_path)(*inputs.values())


# ----- MelWeightMatrix, Binarizer ------------------------------------------------------

def test_mel_weight_matrix_matches_reference(tmp_path):
    inputs = {n: np.array(v, np.int32) for n, v in
              (("bins", 8), ("dft", 16), ("rate", 8192), ("low", 0), ("high", 4096))}
    inputs["low"], inputs["high"] = (np.array(v, np.float32) for v in (0, 4096))
    (w,) = _compare(_model("MelWeightMatrix", inputs, opset=17), inputs, tmp_path)
    assert w.shape == (9, 8) and w.dtype == np.float32
    assert (w.data.max(axis=0) == 1).all()         # every triangle peaks at 1


def test_mel_weight_matrix_bad_edges(tmp_path):
    inputs = {"bins": np.array(8, np.int32), "dft": np.array(16, np.int32),
              "rate": np.array(8192, np.int32), "low": np.array(100, np.float32),
              "high": np.array(50, np.float32)}
    with pytest.raises(OnnxImportError, match="MelWeightMatrix"):
        _load(_model("MelWeightMatrix", inputs, opset=17), tmp_path)(*inputs.values())


def test_binarizer_values():
    """Run directly (the importer admits ai.onnx.ml nodes only once import_checks does)."""
    node = type("Node", (), {"op": "Binarizer", "attrs": {"threshold": 0.5}})()
    out = IMPORT_OPS["Binarizer"](node, [np.array([0.2, 0.5, 0.9, -3.0])], None)
    np.testing.assert_array_equal(out, [0.0, 0.0, 1.0, 0.0])
    assert out.dtype == np.float64
    with pytest.raises(ValueError, match="Binarizer: input dtype"):
        IMPORT_OPS["Binarizer"](node, [np.array([True])], None)
