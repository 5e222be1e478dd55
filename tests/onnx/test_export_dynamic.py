"""Export never freezes a value that depends on an input, and the model zoo exports with
a dynamic batch (and sequence where the model has one).

Each model: ``onnx.export`` with dynamic axes (which validates the example and the grown
inputs), ``onnx.checker.check_model(full_check=True)``, then onnxruntime on inputs of a
third batch (and sequence) size, compared with LeZero.  The models of tests/jit/zoo.py
are in test_export_zoo.py; this file holds the rest of the zoo.
"""
import importlib.util

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

import lezero as lz  # noqa: E402
import lezero.functions as F  # noqa: E402
from lezero import nn  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402
from lezero.nn import models as M  # noqa: E402
from lezero.onnx import ExportError  # noqa: E402
from lezero.onnx.validate import leaf_arrays, ort_session  # noqa: E402


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ids(high, *shape, seed=0):
    return np.random.default_rng(seed).integers(0, high, shape)


B = {"input_0": {0: "batch"}}
BS = {"input_0": {0: "batch", 1: "sequence"}}
HF = dict(vocab_size=99, num_attention_heads=4, intermediate_size=37)

# name -> (builder, example inputs, dynamic axes)
DYNAMIC_ZOO = {
    "vit": (lambda: M.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                        hidden_dim=16, mlp_dim=32, num_classes=10),
            lambda: [_f(1, 3, 32, 32)], B),               # batch 1: the class token
    "swin": (lambda: M.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                       num_heads=[2, 4], window_size=[4, 4],
                                       stochastic_depth_prob=0.0, num_classes=10),
             lambda: [_f(1, 3, 32, 32)], B),
    "densenet": (lambda: M.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16,
                                    num_classes=5), lambda: [_f(1, 3, 32, 32)], B),
    "efficientnet_b0": (lambda: M.efficientnet_b0(num_classes=5), lambda: [_f(1, 3, 32, 32)], B),
    "mobilenet_v3_small": (lambda: M.mobilenet_v3_small(width_mult=0.5, num_classes=5),
                           lambda: [_f(1, 3, 32, 32)], B),
    "convnext": (lambda: M.ConvNeXt([M.convnext.CNBlockConfig(16, 32, 1),
                                     M.convnext.CNBlockConfig(32, None, 1)], num_classes=5),
                 lambda: [_f(1, 3, 32, 32)], B),
    "resnext": (lambda: M.ResNet(M.Bottleneck, [1, 1, 1, 1], groups=4, width_per_group=8,
                                 num_classes=5), lambda: [_f(1, 3, 32, 32)], B),
    "shufflenet": (lambda: M.shufflenet_v2_x0_5(num_classes=5), lambda: [_f(1, 3, 32, 32)], B),
    "squeezenet": (lambda: M.squeezenet1_1(num_classes=5), lambda: [_f(1, 3, 32, 32)], B),
    "bert": (lambda: M.BertForMaskedLM(hidden_size=32, num_hidden_layers=2, **HF),
             lambda: [_ids(99, 2, 5), np.ones((2, 5), np.int64)],
             {"input_0": {0: "batch", 1: "sequence"}, "input_1": {0: "batch", 1: "sequence"}}),
    "gpt2": (lambda: M.GPT2LMHeadModel(vocab_size=99, n_embd=32, n_layer=2, n_head=4,
                                       n_positions=24), lambda: [_ids(99, 2, 5)], BS),
    "llama": (lambda: M.LlamaForCausalLM(hidden_size=32, num_hidden_layers=2,
                                         num_key_value_heads=2, max_position_embeddings=64,
                                         **HF), lambda: [_ids(99, 2, 5)], BS),
    "lstm_2_layers": (lambda: nn.LSTM(4, 6, num_layers=2), lambda: [_f(5, 2, 4)],
                      {"input_0": {0: "sequence", 1: "batch"}}),
    "gru_bidirectional_2_layers": (lambda: nn.GRU(4, 6, num_layers=2, bidirectional=True),
                                   lambda: [_f(5, 2, 4)],
                                   {"input_0": {0: "sequence", 1: "batch"}}),
    "textcnn": (lambda: M.get_model("textcnn", vocab_size=30, num_classes=4, embed_dim=12,
                                    num_filters=4), lambda: [_ids(29, 2, 9) + 1], B),
    "speech_ctc": (lambda: M.get_model("speech_ctc", n_mels=8, num_classes=5, channels=8,
                                       hidden_size=8), lambda: [_f(2, 8, 20)], B),
    "unet": (lambda: M.get_model("unet", n_channels=1, n_classes=2, base_channels=4),
             lambda: [_f(1, 1, 32, 32)], B),
    "yolov5n": (lambda: M.get_model("yolov5n", num_classes=3), lambda: [_f(1, 3, 64, 64)], B),
    "simclr": (lambda: M.get_model("simclr", in_channels=1, width=8, proj_dim=8),
               lambda: [_f(2, 1, 28, 28)], B),
    # AlexNet at full width (its classifier is 58M weights) on small images: the adaptive
    # pool makes any size from 63 pixels give the same 6x6 features.
    "alexnet": (lambda: M.get_model("alexnet", num_classes=10), lambda: [_f(1, 3, 64, 64)], B),
    # EfficientNetV2's fused MBConv blocks (EfficientNet-B0 above has the plain ones).
    "efficientnet_v2_s": (lambda: M.get_model("efficientnet_v2_s", num_classes=5),
                          lambda: [_f(1, 3, 32, 32)], B),
    "word2vec": (lambda: M.get_model("word2vec", vocab_size=50, embedding_dim=8),
                 lambda: [_ids(50, 4), _ids(50, 4, seed=1), _ids(50, 4, 3, seed=2)],
                 {f"input_{k}": {0: "batch"} for k in range(3)}),
    "ddpm_unet": (lambda: M.get_model("ddpm_unet", in_channels=1, base_channels=8,
                                      channel_mult=(1, 2)),
                  lambda: [_f(2, 1, 16, 16), np.array([3, 517])],    # t: the embedding
                  {"input_0": {0: "batch"}, "input_1": {0: "batch"}}),
    "gru_seq2seq": (lambda: M.get_model("gru_seq2seq", src_vocab=12, tgt_vocab=12,
                                        embed_dim=4, hidden_size=8, attn_dim=8),
                    lambda: [np.array([[5, 7, 9, 0, 0], [3, 4, 2, 8, 1]]),   # padded
                             np.array([[1, 2, 3], [1, 4, 5]])],
                    {"input_0": {0: "batch", 1: "sequence"}, "input_1": {0: "batch"}}),
    "seq2seq_transformer": (lambda: M.Seq2SeqTransformer(11, 13, d_model=16, nhead=2,
                                                         num_encoder_layers=1,
                                                         num_decoder_layers=1,
                                                         dim_feedforward=32),
                            lambda: [_ids(11, 2, 5), _ids(13, 2, 4, seed=1)],
                            {"input_0": {0: "batch", 1: "source"},     # positions, causal
                             "input_1": {0: "batch", 1: "target"}}),   # mask follow T
    "dqn": (lambda: M.get_model("dqn", obs_dim=4, n_actions=2, hidden=8), lambda: [_f(2, 4)], B),
    "a2c": (lambda: M.get_model("a2c", obs_dim=4, n_actions=2, hidden=8), lambda: [_f(2, 4)], B),
}


def build(name, seed=0):
    """The model in eval mode, every all-zero parameter (zero-initialised heads) given
    small random values so that the outputs say something, and its example inputs."""
    lz.manual_seed(seed)
    make, inputs, _ = DYNAMIC_ZOO[name]
    model = make().eval()
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        if not np.any(p.data):
            p.data[...] = 0.1 * rng.standard_normal(p.shape).astype(p.dtype)
    return model, inputs()


def third_size(xs, dyn, names):
    """The inputs grown again along their dynamic axes (batch by 2, sequence by 3): a size
    neither the example nor the export's validation used."""
    out = []
    for name, x in zip(names, xs):
        for axis, dim in sorted(dyn.get(name, {}).items()):
            extra = 3 if dim == "sequence" else 2
            x = np.concatenate([x, np.take(x, list(range(extra)), axis=axis, mode="wrap")],
                               axis=axis)
        out.append(x)
    return out


def run_both(path, model, xs, names):
    """(onnxruntime outputs, LeZero outputs) of the file and the model on ``xs``."""
    with open(path, "rb") as f:
        session = ort_session(f.read())
    got = session.run(None, dict(zip(names, xs)))
    with lz.no_grad():
        ref = leaf_arrays(model(*xs))
    return got, ref


def assert_close(got, ref, tol=1e-4):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        scale = max(1.0, float(np.max(np.abs(r))))
        assert float(np.max(np.abs(g - r))) <= tol * scale


@pytest.mark.parametrize("name", sorted(DYNAMIC_ZOO))
def test_zoo_model_exports_with_dynamic_axes(tmp_path, name):
    model, xs = build(name)
    dyn = DYNAMIC_ZOO[name][2]
    path = str(tmp_path / f"{name}.onnx")
    report = lonnx.export(model, tuple(xs), path, dynamic_axes=dyn)
    assert len(report.cases) >= 2                          # example and grown inputs
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    for inp in proto.graph.input:
        dims = inp.type.tensor_type.shape.dim
        for axis in dyn.get(inp.name, {}):
            assert dims[axis].dim_param                    # symbolic, not a number
    names = [i.name for i in proto.graph.input]
    bigger = third_size(xs, dyn, names)
    got, ref = run_both(path, model, bigger, names)
    assert_close(got, ref)
    assert max(float(np.max(np.abs(r))) for r in ref) > 1e-3   # the outputs are not ~0


def test_bert_keeps_its_attention_mask_as_an_input(tmp_path):
    """Exported with an all-ones mask, the file still computes with the mask: a padded
    mask fed to onnxruntime gives LeZero's logits on that mask."""
    model, (ids, ones) = build("bert")
    path = str(tmp_path / "bert.onnx")
    lonnx.export(model, (ids, ones), path, input_names=["input_ids", "attention_mask"],
                 dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                               "attention_mask": {0: "batch", 1: "sequence"}})
    proto = onnx.load(path)
    assert [i.name for i in proto.graph.input] == ["input_ids", "attention_mask"]
    padded = np.array([[1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0], [1] * 7], np.int64)
    ids3 = _ids(99, 3, 7, seed=3)
    got, ref = run_both(path, model, [ids3, padded], ["input_ids", "attention_mask"])
    assert_close(got, ref)
    _, unmasked = run_both(path, model, [ids3, np.ones_like(padded)],
                           ["input_ids", "attention_mask"])
    assert np.max(np.abs(unmasked[0][0, :3] - ref[0][0, :3])) > 1e-3   # the mask acts


def test_a_value_computed_from_an_input_in_numpy_is_refused(tmp_path):
    """A mask made with NumPy from an input's values would be frozen into the file (an
    all-ones mask here: permuting its entries would not reveal it)."""
    def masked(x, mask):
        keep = mask.data.astype(bool)              # NumPy, outside LeZero operators
        return F.where(keep, x, x * 0)

    x, mask = _f(2, 3), np.ones((2, 3), np.int64)
    with pytest.raises(ExportError, match=r"node \d+ \(\w+\): .* computed from the values "
                                          r"of 'input_1' outside LeZero operators"):
        lonnx.export(masked, (x, mask), str(tmp_path / "m.onnx"))
    assert not (tmp_path / "m.onnx").exists()


def test_a_numpy_output_and_a_value_branch_are_refused(tmp_path):
    def branch(x):
        return F.relu(x) if float(lz.as_variable(x).data.sum()) > 5 else F.tanh(x)

    def constant_out(x):
        return F.relu(x), F.relu(lz.as_variable(x).data * 2)     # NumPy, then a constant

    x = np.ones((2, 3), np.float32)                # sum 6; the check's values sum to 4.5
    with pytest.raises(ExportError, match="different operators for other values of "
                                          "'input_0'"):
        lonnx.export(branch, x, str(tmp_path / "b.onnx"))
    with pytest.raises(ExportError, match="output 1 was computed from the values"):
        lonnx.export(constant_out, x, str(tmp_path / "c.onnx"))


GRAPH_AXES = {"x": {0: "nodes"}, "edge_index": {1: "edges"}}


def _graph(num_nodes, num_edges, seed):
    """Node features and random edges, one of them repeated and the last node isolated
    (no edge touches it), so duplicates and degree-1 rows are exercised."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes - 1, (2, num_edges))
    edges[:, -1] = edges[:, 0]
    return _f(num_nodes, 3, seed=seed), edges


@pytest.mark.parametrize("name", ["gcn", "gat"])
def test_graph_models_export_with_dynamic_nodes_and_edges(tmp_path, name):
    """The adjacency is built from ``edge_index`` by LeZero operators, so the file takes
    the graph as an input: onnxruntime on a larger graph (more nodes and edges) gives
    LeZero's logits, OpenVINO agrees on the export's own cases, and another graph of
    the same size gives other logits (the structure is not frozen)."""
    lz.manual_seed(0)
    model = M.get_model(name, in_channels=3, out_channels=4).eval()
    path = str(tmp_path / f"{name}.onnx")
    report = lonnx.export(model, _graph(6, 9, seed=1), path, input_names=list(GRAPH_AXES),
                          dynamic_axes=GRAPH_AXES, check=["onnxruntime", "openvino"]
                          if importlib.util.find_spec("openvino") else "onnxruntime")
    assert {"ScatterND", "EyeLike"} <= set(report.ops) and len(report.cases) == 2
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    dims = [[d.dim_param for d in i.type.tensor_type.shape.dim] for i in proto.graph.input]
    assert dims == [["nodes", ""], ["", "edges"]]
    names = list(GRAPH_AXES)
    got, ref = run_both(path, model, list(_graph(11, 30, seed=2)), names)
    assert_close(got, ref)
    assert got[0].shape == (11, 4) and float(np.max(np.abs(ref[0]))) > 1e-3
    x, edges = _graph(11, 30, seed=2)
    other, _ = run_both(path, model, [x, np.flip(edges, axis=0).copy()], names)
    assert np.max(np.abs(other[0] - got[0])) > 1e-3          # reversed edges: other logits


def test_gpt2_exports_with_dynamic_sequence_positions(tmp_path):
    model, xs = build("gpt2")
    report = lonnx.export(model, tuple(xs), str(tmp_path / "g.onnx"), dynamic_axes=BS)
    assert report.cases[1][0] == (3, 7) and "Range" in report.ops


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_causal_lm_with_a_padding_mask_follows_batch_and_sequence(tmp_path, name):
    """Causal and padding masks together (their minimum), both computed from the mask
    input by LeZero operators: exported with a dynamic batch and sequence, a left-padded
    mask of another length fed to the file gives LeZero's logits, and the mask acts."""
    model, (ids,) = build(name)
    path = str(tmp_path / f"{name}.onnx")
    names = ["input_ids", "attention_mask"]
    report = lonnx.export(model, (ids, np.ones_like(ids)), path, input_names=names,
                          dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names})
    assert "Trilu" in report.ops
    padded = np.array([[0, 0, 0, 1, 1, 1, 1], [1] * 7, [0, 1, 1, 1, 1, 1, 1]], np.int64)
    ids3 = _ids(99, 3, 7, seed=4)
    got, ref = run_both(path, model, [ids3, padded], names)
    assert_close(got, ref)
    _, unmasked = run_both(path, model, [ids3, np.ones_like(padded)], names)
    assert np.max(np.abs(unmasked[0][0, 3:] - ref[0][0, 3:])) > 1e-3   # padding acts
    with lz.no_grad():
        causal = leaf_arrays(model(ids3[:, :4], padded[:, :4]))[0]
    real = padded[:, :4] == 1          # padded queries see no key: uniform over all
    np.testing.assert_allclose(got[0][:, :4][real], causal[real], rtol=1e-4, atol=1e-4)
