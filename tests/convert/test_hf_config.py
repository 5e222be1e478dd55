"""``python -m lezero.convert FOLDER --model gpt2|bert|llama`` reads the folder's
config.json: small Hugging Face-style folders written by LeZero itself (config.json +
model.safetensors, no downloads) convert into models of their configs' sizes, and a
config that cannot be mapped is refused in one line naming the field."""
import json

import numpy as np
import pytest

import lezero as lz
from lezero.convert import ConversionError, constructor_kwargs
from lezero.convert.__main__ import main
from lezero.convert.hf_config import read_config
from lezero.nn import models

# Small configs as Hugging Face writes them: the network's fields and fields that do not
# change it (architectures, token ids, dtype, task settings).
CONFIGS = {
    "gpt2": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 37,
             "n_positions": 16, "n_ctx": 16, "n_embd": 12, "n_layer": 3, "n_head": 3,
             "activation_function": "gelu_new", "bos_token_id": 0, "eos_token_id": 0,
             "summary_type": "cls_index", "torch_dtype": "float32",
             "task_specific_params": {"text-generation": {"do_sample": True}}},
    "bert": {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 41,
             "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 24, "max_position_embeddings": 20, "type_vocab_size": 2,
             "pad_token_id": 0, "position_embedding_type": "absolute",
             "classifier_dropout": None, "gradient_checkpointing": False},
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
              "vocab_size": 29, "hidden_size": 16, "intermediate_size": 20,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 500.0,
              "pretraining_tp": 1, "bos_token_id": 1, "eos_token_id": 2, "use_cache": True},
}
# (a weight of the model, its shape from the config above)
SIZED = {"gpt2": ("transformer.h.2.mlp.c_fc.weight", (12, 48)),
         "bert": ("bert.encoder.layer.1.intermediate.dense.weight", (24, 16)),
         "llama": ("model.layers.1.self_attn.k_proj.weight", (8, 16))}


def _folder(tmp_path, name, config):
    """A Hugging Face-style folder: config.json and the weights of a LeZero model built
    from it (tied copies left out, as Hugging Face saves them)."""
    folder = tmp_path / name
    folder.mkdir()
    lz.manual_seed(0)
    net = models.get_model(name, config=config)
    seen, state = set(), {}
    for key, p in net.state_dict(keep_vars=True).items():
        if id(p) not in seen:
            seen.add(id(p))
            state[key] = p.data
    lz.save(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config))
    return folder, net


@pytest.fixture
def small_models_only(monkeypatch):
    """get_model refuses to build a Hugging Face port without the small config's sizes:
    a converter that ignored config.json would build the default (LLaMA's is 7B
    parameters) and exhaust the machine's memory instead of failing."""
    build = models.get_model

    def get_model(name, **kwargs):
        if name in CONFIGS and "config" not in kwargs:
            assert kwargs.get("vocab_size", 10 ** 9) < 100, f"{name} built with {kwargs}"
        return build(name, **kwargs)
    monkeypatch.setattr(models, "get_model", get_model)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_folder_converts_into_the_model_its_config_describes(name, tmp_path, capsys,
                                                               small_models_only):
    folder, ref = _folder(tmp_path, name, CONFIGS[name])
    out = tmp_path / f"{name}.npz"
    assert main([str(folder), "--model", name, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{name} configured by {folder / 'config.json'}" in printed
    assert "missing 0, unexpected 0, shape mismatches 0" in printed
    state = lz.load(str(out))
    key, shape = SIZED[name]
    assert state[key].shape == shape
    net = models.get_model(name, config=CONFIGS[name])
    net.load_state_dict(state, strict=True)
    ids = np.random.default_rng(0).integers(0, CONFIGS[name]["vocab_size"], (2, 5))
    with lz.no_grad():
        np.testing.assert_array_equal(net.eval()(ids).data, ref.eval()(ids).data)


def test_arg_overrides_a_config_field(tmp_path):
    folder, _ = _folder(tmp_path, "gpt2", CONFIGS["gpt2"])
    kwargs = constructor_kwargs(folder, "gpt2", {"resid_pdrop": 0.0})
    assert kwargs["n_layer"] == 3 and kwargs["resid_pdrop"] == 0.0
    assert constructor_kwargs(folder / "model.safetensors", "gpt2", {"n_layer": 1}) == \
        {"n_layer": 1}                                 # a file: no config to read
    assert constructor_kwargs(folder, "resnet18", {}) == {}   # not a Hugging Face port


@pytest.mark.parametrize("change,named", [
    ({"n_foo": 3}, "field 'n_foo' has no counterpart in LeZero's gpt2"),
    ({"model_type": "bert"}, "model_type 'bert' is not gpt2's ('gpt2')"),
    ({"activation_function": "relu6"}, "activation_function"),
    ({"n_layer": 0}, "n_layer"),
    ({"add_cross_attention": True}, "add_cross_attention=True is not supported"),
])
def test_a_config_that_cannot_be_mapped_is_refused_in_one_line(change, named, tmp_path,
                                                                 capsys, small_models_only):
    folder, _ = _folder(tmp_path, "gpt2", CONFIGS["gpt2"])
    (folder / "config.json").write_text(json.dumps({**CONFIGS["gpt2"], **change}))
    out = tmp_path / "out.npz"
    assert main([str(folder), "--model", "gpt2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert named in err and "config.json" in err, err
    assert not out.exists()


def test_a_config_that_is_no_json_object_is_refused(tmp_path):
    folder, _ = _folder(tmp_path, "gpt2", CONFIGS["gpt2"])
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(ConversionError, match="expected a JSON object of config fields"):
        read_config(str(folder / "config.json"), "gpt2")
    (folder / "config.json").write_text("{'n_layer': 2}")
    with pytest.raises(ConversionError, match="config.json: not valid JSON"):
        read_config(str(folder / "config.json"), "gpt2")


def test_without_a_config_another_size_asks_for_it(tmp_path, capsys, small_models_only):
    folder, _ = _folder(tmp_path, "gpt2", CONFIGS["gpt2"])
    (folder / "config.json").unlink()
    other = ["vocab_size=39", "n_positions=16", "n_embd=16", "n_layer=3", "n_head=4"]
    args = [str(folder), "--model", "gpt2", *[a for kv in other for a in ("--arg", kv)],
            "-o", str(tmp_path / "out.npz")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "another size of this model" in err and "--arg KEY=VALUE" in err, err
    assert "--allow-mismatch" not in err


@pytest.mark.parametrize("name,cls", [("gpt2", "GPT2Config"), ("bert", "BertConfig"),
                                      ("llama", "LlamaConfig")])
def test_configs_written_by_transformers_map(name, cls, tmp_path):
    """Every field transformers writes into config.json is known to the port."""
    transformers = pytest.importorskip("lezero.testing.oracles").import_transformers()
    fields = {k: v for k, v in CONFIGS[name].items()
              if k not in ("model_type", "architectures", "n_ctx", "summary_type",
                           "task_specific_params", "torch_dtype")}
    getattr(transformers, cls)(**fields).save_pretrained(tmp_path)
    config = read_config(str(tmp_path / "config.json"), name)
    net = models.get_model(name, config=config)
    key, shape = SIZED[name]
    assert net.state_dict()[key].shape == shape
