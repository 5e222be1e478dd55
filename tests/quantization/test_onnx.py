"""INT8 and fake-quantized models trace, and export to ONNX in QDQ form that
onnxruntime runs with LeZero's outputs (within one output quantization step)."""
import os

import numpy as np
import pytest

import lezero as lz
from lezero import jit, nn
from lezero import quantization as Q

from tests.quantization._models import data, ptq, run, small_cnn, warm

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _session(path, optimize=True):
    opts = lz.onnx.session_options(threads=1)      # exact int8 on AVX2 CPUs without VNNI
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def int8():
    lz.manual_seed(5)
    x, _ = data(16)
    return ptq(warm(small_cnn(), x), x)[1], x


def test_trace_replays_the_integer_graph(int8):
    model, x = int8
    graph = jit.trace(model, x)
    ops = {n.op for n in graph.graph.nodes}
    assert {"QuantizePerTensor", "QuantizedConv2d", "QuantizedLinear",
            "DequantizePerTensor"} <= ops
    np.testing.assert_array_equal(graph(x).data, run(model, x))


def test_qdq_export_runs_in_onnxruntime(int8, tmp_path):
    model, x = int8
    path = os.path.join(tmp_path, "int8.onnx")
    report = Q.export_onnx(model, x, path, dynamic_axes={"input_0": {0: "batch"}})
    proto = onnx.load(path)
    kinds = {n.op_type for n in proto.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv", "Gemm"} <= kinds
    # int8 weights are written as uint8 + 128 (exact in onnxruntime on AVX2 CPUs too)
    weights = [i for i in proto.graph.initializer
               if i.data_type == onnx.TensorProto.UINT8 and len(i.dims) >= 2]
    assert len(weights) == 4                                # conv, conv, linear, linear
    int8_weights = [m.weight for m in model.modules()
                    if getattr(getattr(m, "weight", None), "dtype", None) == np.int8]
    shifted = sorted(onnx.numpy_helper.to_array(w).astype(np.int16).ravel().tolist()
                     for w in weights)
    assert shifted == sorted((np.asarray(w).astype(np.int16) + 128).ravel().tolist()
                             for w in int8_weights)
    step = float(model.module[10].scale)
    ref = run(model, x)
    for optimize in (True, False):                          # QDQ fused to int8 kernels, or not
        got = _session(path, optimize).run(None, {"input_0": x})[0]
        diff = np.abs(got - ref) / step
        assert diff.max() <= 1.0 + 1e-3 and diff.mean() < 0.2, (optimize, diff.max())
    got = _session(path).run(None, {"input_0": x[:5]})[0]    # the dynamic batch axis
    assert got.shape == (5, 4)
    assert report.max_abs_diff["output_0"] <= step * 1.001


def test_fake_quantized_model_exports_as_qdq(tmp_path):
    lz.manual_seed(6)
    x, _ = data(8)
    qat = Q.prepare_qat(Q.fuse(small_cnn(), qat=True))
    qat(x)                                    # the observers see one batch
    qat = Q.disable_observer(qat.eval())
    path = os.path.join(tmp_path, "qat.onnx")
    step = float(qat.module[10].activation_post_process.scale[0])
    report = lz.onnx.export(qat, x, path, atol=1.001 * step, rtol=0)
    # onnxruntime divides by the scale where PyTorch and LeZero multiply by its
    # reciprocal: a value at a rounding tie may land one step away
    assert report.max_abs_diff["output_0"] <= 1.001 * step
    kinds = [n.op_type for n in onnx.load(path).graph.node]
    assert kinds.count("QuantizeLinear") >= 8


def test_dynamic_linear_exports(tmp_path):
    dyn = Q.quantize_dynamic(nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3)))
    x = np.random.default_rng(8).standard_normal((4, 8)).astype(np.float32)
    path = os.path.join(tmp_path, "dyn.onnx")
    report = lz.onnx.export(dyn, x, path, atol=2e-2, rtol=0)
    kinds = {n.op_type for n in onnx.load(path).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= kinds
    assert report.max_abs_diff["output_0"] < 2e-2


def test_lsq_model_exports_with_its_learned_parameters(tmp_path):
    lz.manual_seed(7)
    x, _ = data(8)
    qat = Q.prepare_qat(Q.fuse(small_cnn(), qat=True), qconfig=Q.lsq_qat_qconfig)
    assert isinstance(qat.module[0].activation_post_process, Q.LearnableFakeQuantize)
    qat(x)
    qat.eval()
    path = os.path.join(tmp_path, "lsq.onnx")
    step = float(qat.module[10].activation_post_process.scale.data[0])
    report = lz.onnx.export(qat, x, path, atol=1.001 * step, rtol=0)
    assert report.max_abs_diff["output_0"] <= 1.001 * step


def test_dynamic_linear_weights_are_uint8_and_exact_in_a_plain_session(tmp_path):
    """The int8 weight (here with non-zero zero points per output) goes into
    MatMulInteger as uint8 + 128 with per-column zero points: a default onnxruntime
    session (no ``session_options``) gives LeZero's output on any CPU."""
    rng = np.random.default_rng(3)
    dyn = Q.quantize_dynamic(nn.Sequential(nn.Linear(64, 5)))
    layer = dyn[0]
    w_q = rng.integers(-128, 128, (5, 64)).astype(np.int8)
    zp = np.array([0, 3, -7, 12, -1], np.int8)
    layer._set(w_q, np.full(5, 0.02, np.float32), zp, np.zeros(5, np.float32))
    x = (4 * rng.standard_normal((6, 64))).astype(np.float32)
    path = str(tmp_path / "dyn.onnx")
    lz.onnx.export(dyn, x, path, atol=1e-5, rtol=1e-5)
    proto = onnx.load(path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    (mm,) = [n for n in proto.graph.node if n.op_type == "MatMulInteger"]
    b, b_zp = inits[mm.input[1]], inits[mm.input[3]]
    assert b.dtype == np.uint8 and b_zp.dtype == np.uint8
    np.testing.assert_array_equal(b.astype(np.int16) - 128, w_q.T)
    np.testing.assert_array_equal(b_zp.astype(np.int16) - 128, zp)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input_0": x})[0]
    np.testing.assert_allclose(got, run(dyn, x), rtol=1e-5, atol=1e-5)


def test_session_options_ask_for_exact_int8_arithmetic():
    opts = lz.onnx.session_options(threads=2)
    assert opts.get_session_config_entry("session.x64quantprecision") == "1"
    assert opts.intra_op_num_threads == 2 and opts.inter_op_num_threads == 2
    assert lz.onnx.session_options().intra_op_num_threads == 0      # onnxruntime's default
