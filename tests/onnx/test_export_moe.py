"""The mixture-of-experts Transformer LM exports with a dynamic batch and sequence.

Eval mode routes with LeZero operators (``RouteTopK`` -> ONNX TopK, ``RouteCapacity`` ->
CumSum over the assignments in priority order), so the file's routing and capacity follow
the input: checked with onnxruntime at a third size (batch and sequence neither the
example nor the export's validation used), ``check_model(full_check=True)``, OpenVINO,
and two inputs that route differently.
"""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

import lezero as lz  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402
from lezero.nn import models as M  # noqa: E402
from tests.onnx.test_export_dynamic import assert_close, run_both, third_size  # noqa: E402

DYN = {"input_0": {0: "batch", 1: "sequence"}}
VOCAB = 23

# name -> MoETransformerLM arguments beyond the small shared ones
CONFIGS = {
    "top2": dict(top_k=2),
    "top1_capacity": dict(top_k=1, capacity_factor=0.5),
    "top2_capacity": dict(top_k=2, capacity_factor=1.0),
}


def build(name, seed=0):
    """The small zoo MoE LM in eval mode with embeddings and router weights of unit scale
    (at the init's 0.02 every token routes alike), so that routing depends on the tokens
    and has no near-ties."""
    lz.manual_seed(seed)
    model = M.get_model("moe_transformer", vocab_size=VOCAB, block_size=16, d_model=16,
                        n_head=2, n_layer=2, d_ff=24, num_experts=4, **CONFIGS[name])
    rng = np.random.default_rng(seed)
    for p in [model.wte.weight, model.wpe.weight] + [b.moe.gate.weight for b in model.blocks]:
        p.data[...] = rng.standard_normal(p.shape)
    return model.eval()


def ids(*shape, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, shape)


def export(tmp_path, model, check="onnxruntime"):
    path = str(tmp_path / "moe.onnx")
    report = lonnx.export(model, (ids(2, 5),), path, dynamic_axes=DYN, check=check)
    return path, report


def routing(model):
    return [b.moe.last_routing for b in model.blocks]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_moe_lm_exports_with_dynamic_batch_and_sequence(tmp_path, name):
    model = build(name)
    path, report = export(tmp_path, model)
    assert report.cases[1][0] == (3, 7)                       # batch + 1, sequence + 2
    assert max(report.max_abs_diff.values()) < 1e-4
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and dims[1].dim_param            # both symbolic
    ops = {n.op_type for n in proto.graph.node}
    assert "TopK" in ops and ("CumSum" in ops) == ("capacity" in name)
    bigger = third_size([ids(2, 5)], DYN, ["input_0"])         # (4, 8): 32 tokens
    got, ref = run_both(path, model, bigger, ["input_0"])
    assert bigger[0].shape == (4, 8)
    assert_close(got, ref)
    dropped = [r["dropped"] for r in routing(model)]
    assert (max(dropped) > 0) == ("capacity" in name)          # capacity acts at N = 32


@pytest.mark.parametrize("name", ["top2", "top1_capacity"])
def test_routing_in_the_file_follows_the_input(tmp_path, name):
    """Two inputs of one shape that LeZero routes differently: the file agrees with
    LeZero on both, so neither routing was frozen into it."""
    model = build(name)
    path, _ = export(tmp_path, model)
    a, b = ids(3, 9, seed=1), ids(3, 9, seed=2)
    got_a, ref_a = run_both(path, model, [a], ["input_0"])
    experts_a = [r["experts"].copy() for r in routing(model)]
    got_b, ref_b = run_both(path, model, [b], ["input_0"])
    experts_b = [r["experts"] for r in routing(model)]
    assert any((ea != eb).any() for ea, eb in zip(experts_a, experts_b))
    assert_close(got_a, ref_a)
    assert_close(got_b, ref_b)
    assert np.max(np.abs(ref_a[0] - ref_b[0])) > 1e-3


def test_moe_lm_runs_on_openvino(tmp_path):
    pytest.importorskip("openvino")
    model = build("top2_capacity")
    _, report = export(tmp_path, model, check=["onnxruntime", "openvino"])
    assert set(report.runtime_diff) == {"onnxruntime", "openvino"}
    assert len(report.cases) >= 2
    assert max(report.runtime_diff["openvino"].values()) < 1e-4
