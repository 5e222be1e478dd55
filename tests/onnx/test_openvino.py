"""A second runtime: every zoo model exported with dynamic axes runs on OpenVINO's CPU
plugin (``onnx.export(..., check="openvino")``) and matches LeZero on the example and
the grown inputs.  Skipped when the ``openvino`` package is absent; the error that
``check="openvino"`` gives then is tested in any case."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from lezero import onnx as lonnx  # noqa: E402
from tests.jit import zoo as jit_zoo  # noqa: E402
from tests.onnx import test_export_dynamic as dyn_zoo  # noqa: E402

ZOO = {**{k: (jit_zoo.build, jit_zoo.ZOO[k][2]) for k in jit_zoo.ZOO},
       **{k: (dyn_zoo.build, dyn_zoo.DYNAMIC_ZOO[k][2]) for k in dyn_zoo.DYNAMIC_ZOO}}


def test_check_without_openvino_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)        # import openvino fails
    model, xs = jit_zoo.build("mlp")
    with pytest.raises(ImportError, match=r"check='openvino'\) needs the openvino package"):
        lonnx.export(model, tuple(xs), str(tmp_path / "m.onnx"), check="openvino")
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_runs_on_openvino(tmp_path, name):
    pytest.importorskip("openvino")
    build, dynamic_axes = ZOO[name]
    model, xs = build(name)
    report = lonnx.export(model, tuple(xs), str(tmp_path / f"{name}.onnx"),
                          dynamic_axes=dynamic_axes, check=["onnxruntime", "openvino"])
    assert set(report.runtime_diff) == {"onnxruntime", "openvino"}
    assert len(report.cases) >= 2
    assert max(report.runtime_diff["openvino"].values()) < 1e-3
    assert np.isfinite(list(report.max_abs_diff.values())).all()


def test_tensorrt_script_says_what_is_missing(capsys):
    """tools/trt_check.py (a device check, not run here) exits 2 naming what it lacks."""
    pytest.importorskip("tools.trt_check")
    from tools import trt_check
    try:
        import tensorrt  # noqa: F401
        pytest.skip("TensorRT is installed: run tools/trt_check.py on the GPU machine")
    except ImportError:
        pass
    assert trt_check.main([]) == 2
    assert "TensorRT is missing" in capsys.readouterr().out


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
def test_a_bidirectional_layer_runs_on_openvino_at_any_batch(tmp_path, cell):
    """OpenVINO merges a forward and a reverse cell reading one tensor into a wrong
    bidirectional one for batches above 1; the reverse direction is exported as a forward
    cell over the time-reversed input, which it runs right."""
    pytest.importorskip("openvino")
    from lezero import nn
    layer = getattr(nn, cell)(6, 5, bidirectional=True)
    x = np.random.default_rng(0).standard_normal((7, 3, 6)).astype(np.float32)
    report = lonnx.export(lambda v: layer(v)[0], x, str(tmp_path / "bi.onnx"),
                          dynamic_axes={"input_0": {0: "time", 1: "batch"}},
                          check=["onnxruntime", "openvino"])
    assert max(report.runtime_diff["openvino"].values()) < 1e-4
    assert "Slice" in report.ops
