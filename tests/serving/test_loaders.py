"""Models from files: the NAME=PATH:key=value syntax, checkpoints into zoo models, ONNX
through onnxruntime, real .lzg graphs saved by lezero.jit, register_loader; ServedModel's specs."""
import numpy as np
import pytest

import lezero as lz
import lezero.nn.models  # noqa: F401
from lezero import nn, serving
from lezero.serving import ServedModel, TensorSpec, load_model, parse_model_arg
from lezero.serving.loaders import loaders
from lezero.serving.protocol import ProtocolError

pytestmark = pytest.mark.timeout(30)

MLP_ARGS = dict(model="mlp", in_channels=8, hidden_channels=[6, 3])


def test_parse_model_arg():
    name, path, opts = parse_model_arg(
        "digits=runs/m.npz:model=mlp:hidden_channels=[128,64,10]:flatten=True:act=relu"
        ":shape=[1,8,8]:scale=0.5:tag=none")
    assert (name, path) == ("digits", "runs/m.npz")
    assert opts == {"model": "mlp", "hidden_channels": [128, 64, 10], "flatten": True,
                    "act": "relu", "shape": [1, 8, 8], "scale": 0.5, "tag": None}
    assert parse_model_arg("m=/data/a:b/model.onnx") == ("m", "/data/a:b/model.onnx", {})


@pytest.mark.parametrize("text, match", [
    ("model.onnx", "expected NAME=PATH"),
    ("=model.onnx", "expected NAME=PATH"),
    ("a b=model.onnx", "may use letters"),
    ("m=x.onnx:k=1:k=2", "option 'k' is given twice"),
])
def test_parse_model_arg_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_model_arg(text)


@pytest.mark.parametrize("ext", [".npz", ".safetensors", ".h5"])
def test_checkpoint_loads_into_the_zoo_model(tmp_path, ext):
    lz.manual_seed(1)
    net = nn.models.get_model("mlp", in_channels=8, hidden_channels=[6, 3])
    path = tmp_path / f"m{ext}"
    net.save(str(path))
    served = load_model(path, **MLP_ARGS, max_batch_size=4)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    with lz.no_grad():
        np.testing.assert_array_equal(served.model(x).data, net.eval()(x).data)
    assert served.inputs == [TensorSpec("input__0", "FP32", (8,))]   # from Linear(8, 6)
    assert served.options["max_batch_size"] == 4
    assert not served.model.training


def test_examples_checkpoint_and_explicit_shape(tmp_path):
    net = nn.models.get_model("mlp", in_channels=8, hidden_channels=[6, 3], flatten=True)
    lz.save({"modules": {"model": net.state_dict()}, "epoch": 3}, str(tmp_path / "ck.npz"))
    served = load_model(tmp_path / "ck.npz", **MLP_ARGS, flatten=True, shape=[2, 4],
                        dtype="FP32", input="pixels")
    assert served.inputs == [TensorSpec("pixels", "FP32", (2, 4))]


def test_checkpoint_without_a_model_name_says_what_to_add(tmp_path):
    nn.Linear(2, 2).save(str(tmp_path / "w.npz"))
    with pytest.raises(ValueError, match="holds weights only; name the zoo model"):
        load_model(tmp_path / "w.npz")


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"no loader for .*'\.xyz'.*register_loader"):
        load_model(tmp_path / "m.xyz")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "m.onnx")


def make_onnx(path, batch="N"):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "lin",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(w, "W")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(path))
    return w


def test_onnx_file_runs_in_onnxruntime(tmp_path):
    w = make_onnx(tmp_path / "lin.onnx")
    served = load_model(tmp_path / "lin.onnx")
    assert served.platform == "onnxruntime_onnx"
    assert served.inputs == [TensorSpec("x", "FP32", (4,))]
    assert served.outputs == [TensorSpec("y", "FP32", (3,))]
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(served.model(x)["y"], x @ w, rtol=1e-6)


def test_onnx_with_a_fixed_batch_axis(tmp_path):
    make_onnx(tmp_path / "one.onnx", batch=1)
    assert load_model(tmp_path / "one.onnx").options["max_batch_size"] == 1
    make_onnx(tmp_path / "four.onnx", batch=4)
    with pytest.raises(ValueError, match="fixes the batch axis"):
        load_model(tmp_path / "four.onnx")


def small_graph(path, train=False, batch=2):
    """A real ``.lzg``: a small MLP traced by ``lezero.jit`` at ``batch`` rows and saved,
    in eval mode (as a server calls it) unless ``train``; returns the module."""
    from lezero import jit
    lz.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    x = np.random.default_rng(1).standard_normal((batch, 4)).astype(np.float32)
    if train:
        jit.trace(net, x).save(str(path))
    else:
        net.eval()
        with lz.test_mode():
            jit.trace(net, x).save(str(path))
    return net.eval()


def test_a_saved_lzg_serves_batches_of_any_size(tmp_path):
    net = small_graph(tmp_path / "mlp.lzg")
    served = load_model(tmp_path / "mlp.lzg")
    assert served.platform == "lezero_static_graph"
    assert served.inputs == [TensorSpec("input__0", "FP32", (4,))]   # per sample, traced
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    with lz.no_grad(), lz.test_mode():    # as the server's worker calls a model
        expected = net(x).data
        got = served.model(x)             # 5 rows through a graph traced at 2: 3 chunks
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)
    assert served.warmup() and served.outputs[0].shape == (3,)


def test_a_lzg_traced_in_training_mode_is_refused_with_the_reason(tmp_path):
    small_graph(tmp_path / "train.lzg", train=True)
    with pytest.raises(ValueError, match="traced in training mode"):
        load_model(tmp_path / "train.lzg")
    small_graph(tmp_path / "ok.lzg")
    with pytest.raises(ValueError, match="takes no loader options"):
        load_model(tmp_path / "ok.lzg", model="mlp")


def test_lzg_without_jit_and_register_loader(tmp_path, monkeypatch):
    assert ".lzg" in loaders()
    small_graph(tmp_path / "g.lzg")
    import sys
    import lezero
    if "jit" in vars(lezero):
        monkeypatch.delattr(lezero, "jit")
    monkeypatch.setitem(sys.modules, "lezero.jit", None)        # a build without jit
    with pytest.raises(ImportError, match="StaticGraph file, which needs lezero.jit"):
        load_model(tmp_path / "g.lzg")
    monkeypatch.setitem(serving.loaders.__dict__["_LOADERS"], ".twice",
                        lambda path, factor=2: (lambda x: x * factor))
    (tmp_path / "m.twice").write_text("")
    served = load_model(tmp_path / "m.twice", factor=3, shape=[2])
    assert served.model(np.ones(2))[0] == 3 and served.inputs[0].shape == (2,)
    serving.register_loader("TWICE", lambda path: ServedModel(lambda x: x))
    assert ".twice" in loaders()


def test_padding_options_build_a_padding(tmp_path):
    make_onnx(tmp_path / "lin.onnx")
    served = load_model(tmp_path / "lin.onnx", pad_axis=0, buckets=[2, 4])
    assert served.options["padding"].buckets == [2, 4]
    with pytest.raises(ValueError, match="need pad_axis="):
        load_model(tmp_path / "lin.onnx", buckets=[2, 4])


def test_guessed_input_specs():
    from lezero.serving.model import guess_input
    assert guess_input(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())).shape == (3, -1, -1)
    assert guess_input(nn.Embedding(10, 4)) == TensorSpec("input__0", "INT64", (-1,))
    assert guess_input(nn.Sequential(nn.Flatten(), nn.Linear(4, 2))).shape is None
    assert guess_input(lambda x: x).shape is None


def test_served_model_splits_rows_and_checks_the_request():
    served = ServedModel(nn.Linear(3, 2), inputs=[("x", "FP32", [3])])
    rows = served.split({"x": np.zeros((4, 3), np.float32)})
    assert len(rows) == 4 and rows[0].shape == (3,)
    with pytest.raises(ProtocolError, match=r"expected input\(s\) \['x'\], got \['y'\]"):
        served.split({"y": np.zeros((1, 3), np.float32)})
    with pytest.raises(ProtocolError, match="expected datatype FP32, got FP64"):
        served.split({"x": np.zeros((1, 3))})
    with pytest.raises(ProtocolError, match=r"expected shape \[-1, 3\], got \[1, 4\]"):
        served.split({"x": np.zeros((1, 4), np.float32)})
    with pytest.raises(ProtocolError, match="the batch is empty"):
        served.split({"x": np.zeros((0, 3), np.float32)})
    two = ServedModel(lambda a, b: a, inputs=[("a", "FP32", [1]), ("b", "FP32", [1])])
    with pytest.raises(ProtocolError, match="disagree on the batch size"):
        two.split({"a": np.zeros((1, 1), np.float32), "b": np.zeros((2, 1), np.float32)})


def test_warmup_learns_the_outputs():
    served = ServedModel(lambda x: {"score": x.sum(axis=1), "twice": x * 2},
                         inputs=[("x", "FP32", [3])])
    assert served.outputs is None and served.warmup()
    assert served.outputs == [TensorSpec("score", "FP32", ()),
                              TensorSpec("twice", "FP32", (3,))]
    assert ServedModel(lambda x: x, inputs=[("x", "FP32", [-1])]).warmup() is False
