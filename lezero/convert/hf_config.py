"""A Hugging Face model folder's ``config.json`` as the zoo model's constructor arguments.

``python -m lezero.convert gpt2/ --model gpt2`` builds the network the folder's
``config.json`` describes, not the library default: the zoo's Hugging Face ports (gpt2,
bert, llama) take their config's field names as keyword arguments
(``lezero.nn.models._hf``), so the fields pass straight through once the file is checked.
A config is refused, with one line naming the field, when it is not a JSON object, names
another ``model_type``, or holds a field the port has no counterpart for (one that changes
the network: a field that does not, ``architectures`` or a token id, is accepted).
``--arg KEY=VALUE`` overrides a field.  Every problem is a ``ConversionError``.
"""
import json
import os

__all__ = ["HF_MODEL_TYPES", "config_path", "read_config"]

# The zoo's Hugging Face ports -> the config ``model_type`` each reads.
HF_MODEL_TYPES = {"gpt2": "gpt2", "bert": "bert", "llama": "llama"}
MAX_CONFIG_BYTES = 1 << 20            # configs are a few KiB; a larger file is not one


def config_path(src, model):
    """The ``config.json`` to read for converting ``src`` to ``model``, or None (``src``
    is a file, the folder has none, or ``model`` is not a Hugging Face port)."""
    path = os.path.join(os.fspath(src), "config.json")
    if model in HF_MODEL_TYPES and os.path.isdir(src) and os.path.isfile(path):
        return path
    return None


def _tables(model):
    """(fields, aliases, ignored) of the port registered as ``model``."""
    from lezero.nn.models import bert, gpt2, llama
    return {"gpt2": (gpt2.GPT2_FIELDS, gpt2.GPT2_ALIASES, gpt2.GPT2_IGNORED),
            "bert": (bert.BERT_FIELDS, {}, bert.BERT_IGNORED),
            "llama": (llama.LLAMA_FIELDS, {}, llama.LLAMA_IGNORED)}[model]


def _load_json(path):
    from lezero.convert import ConversionError
    if os.path.getsize(path) > MAX_CONFIG_BYTES:
        raise ConversionError(f"{path}: {os.path.getsize(path)} bytes is no model config "
                              f"(at most {MAX_CONFIG_BYTES})")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise ConversionError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise ConversionError(f"{path}: expected a JSON object of config fields, got "
                              f"{type(config).__name__}")
    return config


def read_config(path, model):
    """The fields of the config at ``path`` for the port ``model``, checked (see the
    module docstring); raises ``ConversionError`` naming the field that does not map."""
    from lezero.convert import ConversionError
    from lezero.nn.models._hf import COMMON_IGNORED, resolve_config
    config = _load_json(path)
    expected = HF_MODEL_TYPES[model]
    if config.get("model_type", expected) != expected:
        raise ConversionError(f"{path}: model_type {config['model_type']!r} is not "
                              f"{model}'s ({expected!r}); name the model it describes")
    fields, aliases, ignored = _tables(model)
    known = set(fields) | set(aliases) | set(ignored) | COMMON_IGNORED
    unknown = sorted(k for k in config if k not in known)
    if unknown:
        raise ConversionError(f"{path}: field {unknown[0]!r} has no counterpart in "
                              f"LeZero's {model}" + (f" (nor {unknown[1:]})" if unknown[1:]
                                                     else "") + "; it cannot be mapped")
    try:                                  # each value's kind, before any model is built
        resolve_config(model, fields, config, aliases, ignored)
    except (TypeError, ValueError) as e:
        raise ConversionError(f"{path}: {e}") from None
    return config
