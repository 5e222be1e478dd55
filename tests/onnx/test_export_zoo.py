"""Every model of the jit zoo exports: onnx.checker (full check) passes inside export,
onnxruntime agrees with LeZero on the example inputs and on inputs grown along each
dynamic axis (the k-th dimension name by k + 1: batch everywhere, batch and sequence for
the LSTM).  test_export_dynamic.py covers the rest of the model zoo."""
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from lezero import onnx as lonnx  # noqa: E402
from tests.jit.zoo import ZOO, build  # noqa: E402


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_exports_and_matches_onnxruntime(tmp_path, name):
    model, xs = build(name)
    path = str(tmp_path / f"{name}.onnx")
    report = lonnx.export(model, tuple(xs), path, dynamic_axes=ZOO[name][2])
    assert len(report.cases) == 2                       # example and grown inputs
    assert report.max_abs_diff and max(report.max_abs_diff.values()) < 1e-4
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param                           # the batch axis is symbolic
    assert model.training is False


def test_sequence_axis_of_the_lstm_is_dynamic(tmp_path):
    model, xs = build("char_lstm")
    report = lonnx.export(model, tuple(xs), str(tmp_path / "lm.onnx"),
                          dynamic_axes=ZOO["char_lstm"][2])
    assert report.cases[1][0] == (3, 7)                 # batch + 1 and sequence + 2
    assert "LSTM" in report.ops


def test_gpt_exports_with_dynamic_batch_and_sequence(tmp_path):
    model, xs = build("gpt")            # positions arange(T) and the causal mask follow T
    report = lonnx.export(model, tuple(xs), str(tmp_path / "gpt.onnx"),
                          dynamic_axes={"input_0": {0: "batch", 1: "sequence"}})
    assert report.cases[1][0] == (3, 8) and max(report.max_abs_diff.values()) < 1e-4
    assert {"Range", "Trilu"} <= set(report.ops)


def test_export_keeps_the_module_mode(tmp_path):
    model, xs = build("mlp")
    model.train()
    lonnx.export(model, tuple(xs), str(tmp_path / "m.onnx"))
    assert model.training is True


def test_names_and_opset(tmp_path):
    model, xs = build("vae")
    path = str(tmp_path / "vae.onnx")
    lonnx.export(model, xs[0], path, opset_version=18, input_names=["x"],
                 output_names=["logits", "mu", "logvar"], dynamic_axes={"x": [0], "mu": [0]})
    proto = onnx.load(path)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert [o.name for o in proto.graph.output] == ["logits", "mu", "logvar"]
    assert proto.opset_import[0].version == 18
