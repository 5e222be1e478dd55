"""Bring weights from PyTorch into LeZero: ``python -m lezero.convert SRC --model NAME -o OUT``.

``SRC`` is a ``torch.save`` file (``.pt``, ``.pth``, ``.bin``; read by LeZero's torch-free
restricted unpickler), a safetensors file, or a Hugging Face model folder (its
``model.safetensors``, sharded ``*.safetensors`` with their index, or
``pytorch_model.bin``).  ``NAME`` is a model of ``lezero.nn.models.list_models()``, built
with ``--arg KEY=VALUE`` constructor arguments; for the Hugging Face ports (gpt2, bert,
llama) a folder's ``config.json`` gives them first (``lezero.convert.hf_config``: a
field that cannot be mapped is refused by name).  The checkpoint's keys are matched to the
model's (``lezero.convert.mapping``), the report says what mapped, what is missing or
unexpected and which shapes disagree, and ``OUT`` -- written atomically by ``lz.save`` --
holds the model's complete ``state_dict``: ``lz.load(OUT)`` loads into the model with
``strict=True``.

A shape mismatch is refused unless ``allow_mismatch`` (then those tensors keep the new
model's initialisation: a new classifier head, say); missing or unexpected keys are
refused unless ``strict=False``.  A malformed or unsafe ``SRC`` raises its format's
``lezero.utils.files.FileFormatError`` naming the file (see docs/serialization.md); the
command line turns every failure into one line and an exit status (``__main__``).
"""
import glob
import json
import os

import numpy as np

from lezero.convert.mapping import Report, match_keys
from lezero.utils.checks import check_bool, check_type

__all__ = ["ConversionError", "read_state_dict", "constructor_kwargs", "convert",
           "convert_state_dict", "Report", "match_keys"]

# Where training scripts nest the weights inside a checkpoint dict, in order of preference.
_NESTED = ("state_dict", "model_state_dict", "model", "module", "net", "ema", "params")


class ConversionError(ValueError):
    """The checkpoint does not fit the model; ``.report`` says how."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


def _is_state_dict(obj):
    return isinstance(obj, dict) and obj and all(
        isinstance(k, str) and isinstance(v, np.ndarray) for k, v in obj.items())


def _select(obj, key, where):
    """The flat ``{name: array}`` inside ``obj``: at the '/'-separated path ``key``, or
    found under a usual name (``state_dict``, ``model``, ...)."""
    if key:
        for part in key.split("/"):
            if not isinstance(obj, dict) or part not in obj:
                raise ConversionError(f"{where}: no entry {part!r} on the path {key!r}")
            obj = obj[part]
    for _ in range(4):                       # at most a few levels of nesting
        if _is_state_dict(obj):
            return obj
        if not isinstance(obj, dict):
            break
        inner = [obj[k] for k in _NESTED if k in obj] or \
            ([next(iter(obj.values()))] if len(obj) == 1 else [])
        if not inner:
            break
        obj = inner[0]
    top = sorted(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
    raise ConversionError(f"{where}: found no state_dict (a dict of names to tensors); its "
                          f"top level is {top}; pick one with --key PATH")


def _files_in(folder):
    """The weight files of a Hugging Face model folder, in shard order."""
    for pattern in ("model.safetensors", "model-*-of-*.safetensors", "*.safetensors",
                    "pytorch_model.bin", "pytorch_model-*-of-*.bin"):
        found = sorted(glob.glob(os.path.join(folder, pattern)))
        if found:
            return found
    raise ConversionError(f"{folder}: a folder without model.safetensors, *.safetensors or "
                          f"pytorch_model.bin")


def _read_one(path):
    from lezero.utils.serialization import load
    if os.path.splitext(path)[1].lower() == ".bin":     # Hugging Face's torch.save files
        from lezero.utils.torch_pickle import load_torch
        return load_torch(path)
    return load(path)


def read_state_dict(src, key=None):
    """The ``{name: NumPy array}`` of a checkpoint file or model folder (shards merged)."""
    check_type("read_state_dict", "src", src, (str, os.PathLike), "a path")
    src = os.fspath(src)
    if not os.path.exists(src):
        raise FileNotFoundError(f"lezero.convert: {src!r} does not exist")
    paths = _files_in(src) if os.path.isdir(src) else [src]
    state = {}
    for path in paths:
        state.update(_select(_read_one(path), key, path))
    return state


def _model_arrays(model):
    params = model.state_dict(keep_vars=True)
    shapes = {k: tuple(v.shape) for k, v in params.items()}
    return params, shapes


def convert_state_dict(state, model, strict=True, allow_mismatch=False):
    """Load the checkpoint ``state`` into ``model`` by the matched keys; returns the
    ``Report``.  Raises ``ConversionError`` (before touching the model) on a shape
    mismatch unless ``allow_mismatch``, on missing or unexpected keys when ``strict``."""
    check_bool("convert_state_dict", "strict", strict)
    check_bool("convert_state_dict", "allow_mismatch", allow_mismatch)
    params, shapes = _model_arrays(model)
    report = match_keys({k: np.shape(v) for k, v in state.items()}, shapes, params)
    if report.mismatched and not allow_mismatch:
        hint = ("most tensors differ: the checkpoint is another size of this model; give "
                "its configuration with --arg KEY=VALUE" if 2 * len(report.mismatched) >
                len(report.mapped) else "pass --allow-mismatch to keep those tensors as "
                "initialised")
        raise ConversionError(f"{len(report.mismatched)} shape mismatch(es), e.g. "
                              f"{_first_mismatch(report)}; {hint}", report)
    if strict and (report.missing or report.unexpected):
        raise ConversionError(f"{len(report.missing)} missing and {len(report.unexpected)} "
                              "unexpected key(s); pass --non-strict to convert anyway",
                              report)
    bad = {k for k, _, _ in report.mismatched}
    mapped = {dst: state[src] for src, dst in report.mapped.items() if dst not in bad}
    model.load_state_dict(mapped, strict=False)
    return report


def _first_mismatch(report):
    key, a, b = report.mismatched[0]
    return f"{key}: checkpoint {a} vs model {b}"


def constructor_kwargs(src, model, kwargs=None):
    """The constructor arguments of ``model`` for ``src``: the fields of a Hugging Face
    folder's ``config.json`` (for the ports gpt2, bert, llama), overridden by
    ``kwargs``.  Raises ``ConversionError`` naming a config field that cannot be mapped."""
    from lezero.convert.hf_config import config_path, read_config
    path = config_path(src, model)
    config = read_config(path, model) if path else {}
    return {**config, **(kwargs or {})}


def convert(src, model, out, model_kwargs=None, strict=True, allow_mismatch=False, key=None):
    """Convert the checkpoint ``src`` for the zoo model named ``model`` (built with a
    Hugging Face folder's ``config.json`` fields, then ``model_kwargs``) and save the
    model's full state_dict to ``out`` (atomically; the extension picks the format: .npz,
    .safetensors, .h5).  Returns the ``Report``."""
    from lezero.nn.models import get_model
    from lezero.utils.serialization import SAVE_EXTENSIONS, save
    check_type("convert", "model", model, str, "a model name (str)")
    check_type("convert", "out", out, (str, os.PathLike), "a path")
    if not os.fspath(out).lower().endswith(SAVE_EXTENSIONS):  # before the slow part
        raise ValueError(f"convert: out {os.fspath(out)!r} must end in one of "
                         f"{', '.join(SAVE_EXTENSIONS)}")
    state = read_state_dict(src, key)       # a bad file fails before a big model is built
    net = get_model(model, **constructor_kwargs(src, model, model_kwargs))
    report = convert_state_dict(state, net, strict, allow_mismatch)
    save(net.state_dict(), out)
    return report


def write_report(report, path):
    """The report as JSON (atomically)."""
    from lezero.utils.files import atomic_write
    atomic_write(path, json.dumps(report.as_dict(), indent=1))
