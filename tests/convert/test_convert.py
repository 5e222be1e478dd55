"""``python -m lezero.convert``: checkpoints written by torch (and by transformers) in the
test become LeZero checkpoints that load strictly and compute what torch computes."""
import json
import re

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from lezero.convert import ConversionError, convert, read_state_dict
from lezero.convert.__main__ import main
from lezero.nn import models
from lezero.nn.models.registry import _MODELS, register_model
from lezero.testing.oracles import import_torchvision, import_transformers


@pytest.fixture(scope="module")
def squeezenet():
    """A torchvision SqueezeNet 1.1 with random weights, in eval mode."""
    torch.manual_seed(0)
    return import_torchvision().models.squeezenet1_1().eval()


def _outputs_match(out_path, ref, name="squeezenet1_1", **kw):
    net = models.get_model(name, **kw)
    net.load_state_dict(lz.load(out_path), strict=True)
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 48)).astype(np.float32)
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    with lz.no_grad():
        got = net.eval()(x).data
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_pth_to_npz_loads_strictly_and_matches_torch(squeezenet, tmp_path, capsys):
    torch.save(squeezenet.state_dict(), tmp_path / "sq.pth")
    rc = main([str(tmp_path / "sq.pth"), "--model", "squeezenet1_1", "-o",
               str(tmp_path / "sq.npz"), "--report", str(tmp_path / "report.json")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "mapped 52 keys (0 renamed, 0 tied, 0 ignored), missing 0, unexpected 0, " \
           "shape mismatches 0" in out
    assert json.loads((tmp_path / "report.json").read_text())["mapped"] == 52
    _outputs_match(tmp_path / "sq.npz", squeezenet)


def test_safetensors_from_a_ddp_wrapped_checkpoint(squeezenet, tmp_path):
    from safetensors.torch import save_file
    save_file({f"module.{k}": v.contiguous() for k, v in squeezenet.state_dict().items()},
              str(tmp_path / "sq.safetensors"))
    report = convert(tmp_path / "sq.safetensors", "squeezenet1_1", tmp_path / "sq.safetensors.npz")
    assert len(report.renamed) == 52 and report.ok
    _outputs_match(tmp_path / "sq.safetensors.npz", squeezenet)


def test_nested_checkpoint_and_key_path(squeezenet, tmp_path):
    torch.save({"epoch": 3, "optimizer": {}, "model": squeezenet.state_dict()},
               tmp_path / "ck.pt")
    assert len(read_state_dict(tmp_path / "ck.pt")) == 52          # found under "model"
    torch.save({"runs": {"best": squeezenet.state_dict()}, "other": {"a": 1}},
               tmp_path / "deep.pt")
    with pytest.raises(ConversionError, match="found no state_dict.*--key PATH"):
        read_state_dict(tmp_path / "deep.pt")
    assert len(read_state_dict(tmp_path / "deep.pt", key="runs/best")) == 52
    with pytest.raises(ConversionError, match="no entry 'worst'"):
        read_state_dict(tmp_path / "deep.pt", key="runs/worst")


def test_shape_mismatch_is_refused_unless_allowed(squeezenet, tmp_path, capsys):
    torch.save(squeezenet.state_dict(), tmp_path / "sq.pth")
    args = [str(tmp_path / "sq.pth"), "--model", "squeezenet1_1", "--arg", "num_classes=10",
            "-o", str(tmp_path / "sq10.npz")]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "classifier.1.weight: (1000, 512, 1, 1) vs (10, 512, 1, 1)" in captured.out
    assert "--allow-mismatch" in captured.err
    assert not (tmp_path / "sq10.npz").exists()
    assert main(args + ["--allow-mismatch"]) == 0
    sd = lz.load(tmp_path / "sq10.npz")
    assert sd["classifier.1.weight"].shape == (10, 512, 1, 1)     # a fresh head
    np.testing.assert_array_equal(sd["features.0.weight"],
                                  squeezenet.features[0].weight.detach().numpy())


def test_missing_and_unexpected_keys_need_non_strict(squeezenet, tmp_path, capsys):
    state = dict(squeezenet.state_dict())
    del state["features.3.squeeze.bias"]
    state["extra.weight"] = torch.zeros(3)
    torch.save(state, tmp_path / "bad.pth")
    args = [str(tmp_path / "bad.pth"), "--model", "squeezenet1_1", "-o", str(tmp_path / "o.npz")]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "missing (kept as initialised): 1\n  features.3.squeeze.bias" in captured.out
    assert "unexpected (dropped): 1\n  extra.weight" in captured.out
    assert main(args + ["--non-strict"]) == 0
    assert "features.3.squeeze.bias" in lz.load(tmp_path / "o.npz")


def test_densenet_legacy_keys_are_renamed(tmp_path):
    torch.manual_seed(0)
    ref = import_torchvision().models.densenet121().eval()
    # the layout of torchvision's published file: 'norm.1', 'conv.2', no num_batches_tracked
    legacy = {re.sub(r"\.(norm|conv)([12])\.", r".\1.\2.", k): v
              for k, v in ref.state_dict().items() if not k.endswith("num_batches_tracked")}
    torch.save(legacy, tmp_path / "densenet121-a639ec97.pth")
    report = convert(tmp_path / "densenet121-a639ec97.pth", "densenet121", tmp_path / "d.npz")
    # 58 dense layers: norm1 and norm2 (4 tensors each), conv1 and conv2 (one weight each)
    assert report.ok and len(report.renamed) == 58 * 10
    assert len(report.defaulted) == 121 and not report.missing      # one per batch norm
    _outputs_match(tmp_path / "d.npz", ref, name="densenet121")


def test_bad_input_is_reported(tmp_path, capsys):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")   # a pickled Module
    assert main([str(tmp_path / "module.pt"), "--model", "alexnet", "-o",
                 str(tmp_path / "x.npz")]) == 2                 # bad input
    assert "error:" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_state_dict(tmp_path / "nothing.pth")
    torch.save({"w": torch.zeros(1)}, tmp_path / "w.pt")
    with pytest.raises(ValueError, match="get_model: unknown model 'resnet5'"):
        convert(tmp_path / "w.pt", "resnet5", tmp_path / "x.npz")
    with pytest.raises(SystemExit):
        main(["x.pt", "--model", "alexnet", "-o", "y.npz", "--arg", "num_classes"])


class _KeysOf(nn.Module):
    """A LeZero module with exactly the given parameter names and shapes (nested as the
    dotted names say): a stand-in for a Hugging Face model's layout."""

    def __init__(self, shapes, tie=None):
        super().__init__()
        for key, shape in shapes.items():
            owner = self
            *path, leaf = key.split(".")
            for part in path:
                if part not in owner._modules:
                    owner.add_module(part, nn.Module())
                owner = owner._modules[part]
            owner.register_parameter(leaf, lz.Parameter(np.zeros(shape, np.float32)))
        for a, b in (tie or {}).items():           # a is b (tied weights)
            *path, leaf = a.split(".")
            owner = self
            for part in path:
                owner = owner._modules[part]
            owner.register_parameter(leaf, dict(self.named_parameters())[b])


@pytest.mark.parametrize("save", ["safetensors", "bin"])
def test_hugging_face_folder_with_prefix_and_tied_head(tmp_path, save):
    transformers = import_transformers()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, n_positions=16,
                                     vocab_size=20)
    lm = transformers.GPT2LMHeadModel(config)
    base = lm.transformer                       # keys h.0..., no "transformer." prefix
    base.save_pretrained(tmp_path / "hf", safe_serialization=save == "safetensors")
    shapes = {k: tuple(v.shape) for k, v in lm.named_parameters(remove_duplicate=False)}
    name = "_test_gpt2_layout"

    @register_model(name)
    def builder():
        return _KeysOf(shapes, tie={"lm_head.weight": "transformer.wte.weight"})
    try:
        report = convert(tmp_path / "hf", name, tmp_path / "gpt2.npz")
    finally:
        _MODELS.pop(name)
    assert report.ok and report.tied == ["lm_head.weight"]
    assert all(why == "prefix 'transformer.' added" for why in report.renamed.values())
    sd = lz.load(tmp_path / "gpt2.npz")
    np.testing.assert_array_equal(sd["transformer.h.0.attn.c_attn.weight"],
                                  base.h[0].attn.c_attn.weight.detach().numpy())
    np.testing.assert_array_equal(sd["lm_head.weight"], base.wte.weight.detach().numpy())


def test_python_dash_m_entry_point(squeezenet, tmp_path):
    import subprocess
    import sys
    torch.save(squeezenet.state_dict(), tmp_path / "sq.pth")
    proc = subprocess.run([sys.executable, "-m", "lezero.convert", str(tmp_path / "sq.pth"),
                           "--model", "squeezenet1_1", "-o", str(tmp_path / "sq.safetensors")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {tmp_path / 'sq.safetensors'}" in proc.stdout
    _outputs_match(tmp_path / "sq.safetensors", squeezenet)
