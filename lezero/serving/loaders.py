"""Models from files, picked by extension, and the ``NAME=PATH:key=value`` syntax.

=====================================  ====================================================
``.npz .safetensors .h5 .hdf5 .pt``    a LeZero (or PyTorch) state_dict, loaded strictly
                                       into ``nn.models.get_model(model, **kwargs)``; an
                                       ``examples/`` ``checkpoint.npz`` works too
``.onnx``                              run by onnxruntime directly (names, types and
                                       shapes from the graph)
``.lzg``                               a ``lezero.jit`` StaticGraph (``jit.load``),
                                       checked at load for serving (below)
=====================================  ====================================================

The table is open: ``register_loader(".ext", fn)`` adds a format, where ``fn(path,
**options)`` returns a ``ServedModel``, an ``nn.Module`` or any callable on batches.

A static graph runs only the input shapes and the mode it was traced with, so a ``.lzg``
is refused at load, with the reason, unless it can serve: traced in eval mode (the
module's ``eval()`` and ``Config.train`` off, ``lz.test_mode()``), every argument an
array and every input and output with one batch axis of the same size B.  Its inputs
are then advertised with their traced per-sample shapes, and batches of any size run as
chunks of B rows, the last chunk padded by repeating its last row (eval-mode rows do not
mix) and the padding cut from the outputs.

On the command line a model is ``NAME=PATH[:key=value]...``::

    digits=runs/mlp/model.npz:model=mlp:in_channels=64:hidden_channels=[128,64,10]:flatten=True:shape=[64]
    cnn=lenet.onnx:max_batch_size=16
    tagger=tagger.lzg:shape=[-1,32]:pad_axis=0:buckets=[16,32,64,128]

Values are Python literals (``64``, ``[128,64,10]``, ``True``, ``'relu'``) or else plain
text.  The keys in ``SERVING_KEYS`` configure the serving (input spec, batcher, padding);
every other key goes to the loader (for a checkpoint: ``model=`` and the zoo builder's
own arguments).
"""
import ast
import os
import re

import numpy as np

from lezero import cuda
from lezero.serving.model import ServedModel, TensorSpec
from lezero.serving.padding import Padding
from lezero.serving.protocol import datatype_of
from lezero.utils.checks import check_callable, check_type

__all__ = ["register_loader", "load_model", "parse_model_arg", "SERVING_KEYS", "loaders"]

_LOADERS = {}
BATCHER_KEYS = ("max_batch_size", "max_delay_ms", "max_queue_size",
                "preferred_batch_sizes", "timeout_ms")
PADDING_KEYS = {"pad_axis": "axis", "pad_value": "value", "buckets": "buckets",
                "pad_to_bucket": "pad_to_bucket", "pass_mask": "pass_mask",
                "unpad_axis": "unpad_axis"}
SPEC_KEYS = ("shape", "dtype", "input", "inputs", "outputs", "version")
SERVING_KEYS = frozenset(BATCHER_KEYS + SPEC_KEYS + tuple(PADDING_KEYS))


def register_loader(ext, loader):
    """Serve files ending in ``ext`` (``".lzg"``) with ``loader(path, **options)``."""
    check_type("register_loader", "ext", ext, str)
    check_callable("register_loader", "loader", loader)
    ext = ext.lower() if ext.startswith(".") else "." + ext.lower()
    _LOADERS[ext] = loader
    return loader


def loaders():
    """The registered extensions and their loaders."""
    return dict(_LOADERS)


def _split_options(options):
    serving = {k: options.pop(k) for k in list(options) if k in SERVING_KEYS}
    padding = {PADDING_KEYS[k]: serving.pop(k) for k in list(serving) if k in PADDING_KEYS}
    if padding and "axis" not in padding:
        raise ValueError(f"load_model: {sorted(padding)} need pad_axis=")
    if padding:
        serving["padding"] = Padding(**padding)
    return serving, options


def _input_specs(served, serving):
    """The input specs: ``inputs=`` whole, or ``shape``/``dtype``/``input`` overriding
    the first input the loader found."""
    if "inputs" in serving:
        return serving["inputs"]
    first = served.inputs[0]
    if not any(k in serving for k in ("shape", "dtype", "input")):
        return served.inputs
    spec = TensorSpec(serving.get("input", first.name), serving.get("dtype", first.datatype),
                      serving.get("shape", first.shape))
    return [spec] + served.inputs[1:]


def load_model(path, **options):
    """A ``ServedModel`` from a file (see the module docstring for the options)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in _LOADERS:
        raise ValueError(f"load_model: no loader for {path!r} (extension "
                         f"{ext or '(none)'!r}); known: {', '.join(sorted(_LOADERS))}; "
                         "add one with serving.register_loader")
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_model: {path!r} does not exist")
    serving, rest = _split_options(dict(options))
    served = _LOADERS[ext](path, **rest)
    if not isinstance(served, ServedModel):
        served = ServedModel(served)
    batcher = {k: serving[k] for k in BATCHER_KEYS + ("padding",) if k in serving}
    return ServedModel(served.model, _input_specs(served, serving),
                       serving.get("outputs", served.outputs),
                       version=str(serving.get("version", served.version)),
                       platform=served.platform, **dict(served.options, **batcher))


# ----- NAME=PATH:key=value ----------------------------------------------------------------
_OPTION = re.compile(r":(?=[A-Za-z_]\w*=)")


def _value(text):
    lowered = {"true": True, "false": False, "none": None}
    if text.lower() in lowered:
        return lowered[text.lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_model_arg(text):
    """``"NAME=PATH[:key=value]..."`` -> ``(name, path, options)``."""
    check_type("parse_model_arg", "text", text, str)
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"--model: expected NAME=PATH[:key=value]..., got {text!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"--model: the name {name!r} may use letters, digits, '_', '.', '-'")
    path, *pairs = _OPTION.split(rest)
    options = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key in options:
            raise ValueError(f"--model {name}: option {key!r} is given twice")
        options[key] = _value(value)
    return name, path, options


# ----- the built-in loaders ---------------------------------------------------------------
def load_checkpoint(path, model=None, module=None, **kwargs):
    """A zoo model (``get_model(model, **kwargs)``) with the state_dict in ``path``.
    ``module`` picks the entry of a multi-module ``examples/`` checkpoint."""
    import lezero as lz
    from lezero.nn.models import get_model
    if model is None:
        raise ValueError(f"load_model: {path!r} holds weights only; name the zoo model "
                         f"they belong to, e.g. NAME={path}:model=mlp:... "
                         "(nn.models.list_models() has the names)")
    net = get_model(model, **kwargs)
    state = lz.load(path)
    if isinstance(state, dict) and isinstance(state.get("modules"), dict):
        modules = state["modules"]          # a checkpoint.npz written by examples/
        if module is None and len(modules) != 1:
            raise ValueError(f"load_model: {path!r} holds modules {sorted(modules)}; "
                             "pick one with module=NAME")
        state = modules[module] if module is not None else next(iter(modules.values()))
    net.load_state_dict(state)
    return net


def load_static_graph(path, **options):
    """A ``lezero.jit`` StaticGraph file, checked for serving (see the module docstring)."""
    try:
        from lezero import jit
        load = jit.load
    except (ImportError, AttributeError):
        raise ImportError(f"load_model: {path!r} is a StaticGraph file, which needs "
                          "lezero.jit (not in this build of LeZero)") from None
    if options:
        raise ValueError(f"load_model: {path!r} is a StaticGraph file, which takes no "
                         f"loader options; got {sorted(options)}")
    graph = load(path)
    if not isinstance(graph, getattr(jit, "StaticGraph", ())):
        return graph                      # a jit build that loads plain callables
    batch, inputs = _servable(path, graph)
    return ServedModel(_FixedBatch(graph, batch), inputs, platform="lezero_static_graph")


def _servable(path, graph):
    """``(B, input specs)`` of a graph that can serve; a ValueError saying why not."""
    train, module_training = graph.mode
    if train or module_training:
        raise ValueError(f"{path!r} was traced in training mode (Config.train={train}, "
                         f"module.training={module_training}); a graph for serving is "
                         "traced in eval mode: model.eval(), then jit.trace inside "
                         "lz.test_mode()")
    if any(kind != "array" for kind, *_ in graph.signature):
        raise ValueError(f"{path!r} takes non-array arguments (constants of the graph); "
                         "a served graph takes arrays only")
    shapes = [tuple(shape) for _, shape, *_ in graph.signature]
    outputs = [tuple(graph.graph.values[name].shape) for name in graph.graph.outputs]
    batch = shapes[0][0] if shapes and shapes[0] else None
    for what, shape in [("input", s) for s in shapes] + [("output", s) for s in outputs]:
        if not shape or shape[0] != batch:
            raise ValueError(f"{path!r} has {what} shape {shape} and input shapes {shapes}: "
                             "without one batch axis of the same size on every input and "
                             "output the graph cannot serve batches")
    inputs = [TensorSpec(f"input__{i}", datatype_of(dtype), shape[1:])
              for i, (_, shape, dtype, *_) in enumerate(graph.signature)]
    return batch, inputs


def _map(fn, *trees):
    """``fn`` applied leaf by leaf to results of the same structure (dict, tuple, list)."""
    first = trees[0]
    if isinstance(first, dict):
        return {k: fn(*(t[k] for t in trees)) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(fn(*leaves) for leaves in zip(*trees))
    return fn(*trees)


class _FixedBatch:
    """A graph traced at batch ``batch`` run on batches of any size: chunks of ``batch``
    rows, the last padded by repeating its last row, the padding cut from the outputs."""

    def __init__(self, graph, batch):
        self.graph, self.batch = graph, batch

    def __call__(self, *arrays):
        b, results = self.batch, []
        for start in range(0, len(arrays[0]), b):
            chunk = [a[start:start + b] for a in arrays]
            rows = len(chunk[0])
            if rows < b:
                chunk = [np.concatenate([c, np.repeat(c[-1:], b - rows, axis=0)])
                         for c in chunk]
            out = self.graph(*chunk)
            results.append(_map(lambda v: cuda.as_numpy(getattr(v, "data", v))[:rows], out))
        return _map(lambda *parts: np.concatenate(parts), *results)


for _ext in (".npz", ".safetensors", ".h5", ".hdf5", ".pt", ".pth"):
    register_loader(_ext, load_checkpoint)
register_loader(".lzg", load_static_graph)


def _load_onnx(path, **options):
    from lezero.serving.onnx_runtime import load_onnx
    return load_onnx(path, **options)


register_loader(".onnx", _load_onnx)
