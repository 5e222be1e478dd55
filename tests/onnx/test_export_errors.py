"""Export errors: operators without a mapping, opsets, names, dynamic axes."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import lezero.functions as F  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402
from lezero.onnx import ExportError  # noqa: E402
from tests.jit.zoo import ZOO, build  # noqa: E402

X = (np.random.default_rng(4).standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)


def test_operator_without_mapping_names_node_and_operator(tmp_path):
    with pytest.raises(ExportError, match=r"node 1 \(Inv\) has no ONNX mapping"):
        lonnx.export(lambda x: F.inv(F.relu(x)), X, str(tmp_path / "inv.onnx"))
    assert not (tmp_path / "inv.onnx").exists()         # nothing half-written


def test_rule_that_needs_a_newer_opset(tmp_path):
    with pytest.raises(ExportError, match=r"\(Normalize\) needs opset_version >= 17, got 16"):
        lonnx.export(lambda x: F.layer_norm(x, (3,)), X, str(tmp_path / "ln.onnx"),
                     opset_version=16)
    with pytest.raises(ValueError, match="opset_version must be >= 14"):
        lonnx.export(F.relu, X, str(tmp_path / "r.onnx"), opset_version=9)


def test_bad_names_and_dynamic_axes(tmp_path):
    path = str(tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="input_names must be 1 non-empty strings"):
        lonnx.export(F.relu, X, path, input_names=["a", "b"])
    with pytest.raises(ValueError, match="dynamic_axes names 'y'"):
        lonnx.export(F.relu, X, path, dynamic_axes={"y": [0]})
    with pytest.raises(ValueError, match="dynamic axis 5 of input 'input_0' is out of range"):
        lonnx.export(F.relu, X, path, dynamic_axes={"input_0": [5]})
    with pytest.raises(TypeError, match="must be an array or Variable, got str"):
        lonnx.export(F.relu, (X, "x"), path)


def test_a_size_dependent_constant_refuses_a_dynamic_sequence_axis(tmp_path):
    def table_slice(x):                  # a positional table sliced to length T in Python
        return x + np.arange(x.shape[1], dtype=np.float32)
    with pytest.raises(ExportError, match=r"node \d+ \(Add\): input 1 depend on the size"):
        lonnx.export(table_slice, np.ones((2, 5), np.float32), str(tmp_path / "t.onnx"),
                     dynamic_axes={"input_0": {1: "sequence"}})
    model, xs = build("seq2seq_transformer")
    with pytest.raises(ExportError, match=r"fails on inputs longer .*\(3, 5\), \(2, 4\)"):
        lonnx.export(model, tuple(xs), str(tmp_path / "s2s.onnx"),
                     dynamic_axes={"input_0": [0]})      # the batches no longer agree


def test_training_mode_dropout_is_exported_in_eval_mode(tmp_path):
    model, xs = build("mlp")
    report = lonnx.export(model.train(), tuple(xs), str(tmp_path / "m.onnx"))
    assert max(report.max_abs_diff.values()) < 1e-5


def test_the_mapping_table_is_keyed_by_function_class_name():
    rules = lonnx.rules()
    assert {"Linear", "Conv", "LSTMLayer", "Normalize", "MaskedSoftmax"} <= set(rules)
    assert rules["Normalize"].opset == 17 and "LayerNormalization" in rules["Normalize"].emits
    assert ZOO                                               # the zoo list is importable


def test_a_loaded_static_graph_exports_without_its_code(tmp_path):
    from lezero import jit
    model, xs = build("dcgan_discriminator")           # fused groups in its graph
    g = jit.trace(model, *xs)
    assert g.graph.op_counts().get("Fused")
    loaded = jit.load(g.save(str(tmp_path / "d.lzg")))
    report = lonnx.export(loaded, tuple(xs), str(tmp_path / "d.onnx"))
    assert max(report.max_abs_diff.values()) < 1e-5
    with pytest.raises(ExportError, match="holds one input shape; dynamic axes need"):
        lonnx.export(loaded, tuple(xs), str(tmp_path / "e.onnx"),
                     dynamic_axes={"input_0": [0]})


def test_check_names_known_runtimes(tmp_path):
    with pytest.raises(ValueError, match=r"check must be None, one of \('onnxruntime', "
                                         r"'openvino'\) or a list of them, got 'tensorrt'"):
        lonnx.export(F.relu, X, str(tmp_path / "r.onnx"), check="tensorrt")
    report = lonnx.export(F.relu, X, str(tmp_path / "r.onnx"), check=None)
    assert report.cases == [] and report.max_abs_diff == {}
    report = lonnx.export(F.relu, X, str(tmp_path / "r.onnx"))
    assert set(report.runtime_diff) == {"onnxruntime"}
    assert "max |onnxruntime - LeZero|" in str(report)


def test_a_variable_made_from_an_input_during_the_call_is_refused(tmp_path):
    """lz.Variable(mask.data != 0) inside the call would be written as a weight: the file
    would answer with the example's mask for every mask."""
    import lezero as lz

    def masked_sum(x, m):
        return F.sum(x * lz.Variable((m.data != 0).astype(np.float32)))
    x, m = np.ones((2, 3), np.float32), np.array([[1, 0, 1], [1, 1, 0]], np.int64)
    with pytest.raises(ExportError, match=r"the Variable %\w+ \(made during the call"):
        lonnx.export(masked_sum, (x, m), str(tmp_path / "m.onnx"))
