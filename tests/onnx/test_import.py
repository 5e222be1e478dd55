"""onnx.load: LeZero's own exports load back; bad files and unsupported operators."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import lezero as lz  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402
from tests.jit.zoo import build, leaves  # noqa: E402


@pytest.mark.parametrize("name", ["lenet5", "char_lstm", "gpt", "dcgan_generator"])
def test_round_trip_through_onnx(tmp_path, name):
    model, xs = build(name)
    path = str(tmp_path / f"{name}.onnx")
    lonnx.export(model, tuple(xs), path, validate=False)
    net = lonnx.load(path)
    with lz.no_grad():
        for a, b in zip(leaves(net(*xs)), leaves(model(*xs))):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the model's parameters come back as Parameters under their own names
    assert {n for n, _ in model.named_parameters()} <= set(net.onnx_names.values())


def _model_with(op_type, name="mystery"):
    h = onnx.helper
    x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    relu = h.make_node("Relu", ["x"], ["r"], name="first")
    odd = h.make_node(op_type, ["r"], ["y"], name=name)
    return h.make_model(h.make_graph([relu, odd], "g", [x], [y]),
                        opset_imports=[h.make_opsetid("", 17)])


def test_unsupported_operator_names_the_operator_and_node(tmp_path):
    path = str(tmp_path / "decoder.onnx")
    onnx.save(_model_with("ImageDecoder"), path)
    with pytest.raises(lonnx.OnnxImportError,
                       match=r"node 1 'mystery' \(ImageDecoder\) uses operator 'ImageDecoder'"):
        lonnx.load(path)


def test_corrupt_truncated_and_missing_files(tmp_path):
    good = str(tmp_path / "good.onnx")
    onnx.save(_model_with("Relu"), good)
    assert lonnx.load(good)(np.ones((2, 3), np.float32)).shape == (2, 3)
    data = open(good, "rb").read()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(lonnx.OnnxImportError, match="corrupt or truncated"):
        lonnx.load(str(bad))
    bad.write_bytes(b"\xff\xfe garbage \x00" * 10)
    with pytest.raises(lonnx.OnnxImportError, match="not a readable ONNX model|no graph"):
        lonnx.load(str(bad))
    with pytest.raises(FileNotFoundError, match="no such file"):
        lonnx.load(str(tmp_path / "missing.onnx"))


def test_wrong_number_of_inputs(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(_model_with("Relu"), path)
    with pytest.raises(TypeError, match=r"takes 1 inputs \(x\), got 2"):
        lonnx.load(path)(np.ones((2, 3), np.float32), np.ones(1))
