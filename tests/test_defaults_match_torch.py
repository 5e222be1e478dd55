"""Every default of every public layer, loss, optimizer, scheduler and functional operator
that has a PyTorch counterpart equals PyTorch's own, read from ``inspect.signature``.

The table is generated: every public class of ``lezero.nn``, ``lezero.optim`` and
``lezero.optim.lr_scheduler`` whose name exists in torch, and every registered operator
whose name exists in ``torch.nn.functional``.  A silently changed default (LayerNorm's
``eps``, a loss's ``reduction``) fails here.  The intended differences are listed below,
each with its reason; nothing else may differ.
"""
import inspect

import pytest
import torch
import torch.nn.functional as TF

import lezero.functions as F
import lezero.optim.lr_scheduler as lz_sched
from lezero import nn, optim
from lezero.functions.registry import operators

_TORCH_IMPL = "an implementation selector of torch's kernels; LeZero has one implementation"
_DEPRECATED = "deprecated in torch (kept there only for old code)"
_INPLACE = "LeZero's operators never overwrite their input; layers accept inplace=, F does not"

# (name, argument) -> why it differs.  "*" matches every name.
INTENDED = {
    ("*", "device"): "LeZero's layers are created on the CPU and moved with to_gpu()",
    ("*", "dtype"): "parameters are float32; convert with .to()/.double() afterwards",
    ("*", "foreach"): _TORCH_IMPL, ("*", "fused"): _TORCH_IMPL,
    ("*", "capturable"): _TORCH_IMPL, ("*", "differentiable"): _TORCH_IMPL,
    ("*", "size_average"): _DEPRECATED, ("*", "reduce"): _DEPRECATED,
    ("*", "_stacklevel"): "a private argument of torch's warnings",
    ("Hardtanh", "min_value"): _DEPRECATED, ("Hardtanh", "max_value"): _DEPRECATED,
    ("Parameter", "data"): "a LeZero Parameter needs its data (there is no empty tensor)",
    ("Transformer", "activation"): "'relu' names the same function torch's F.relu default is",
    ("TransformerEncoderLayer", "activation"): "as Transformer",
    ("TransformerDecoderLayer", "activation"): "as Transformer",
    ("F.*", "inplace"): _INPLACE,
    ("F.softmax", "dim"): "torch's None is a deprecated implicit choice; LeZero uses -1",
    ("F.log_softmax", "dim"): "as softmax",
    ("F.softmax", "dtype"): "compute in the input's dtype (amp.autocast casts instead)",
    ("F.log_softmax", "dtype"): "as softmax",
    ("F.gumbel_softmax", "eps"): _DEPRECATED,
    ("F.pad", "value"): "F.pad is numpy.pad (constant_values=0): an array operation takes "
                        "NumPy's arguments; nn.ConstantPad*d take torch's",
    ("F.normalize", "out"): "LeZero operators return new arrays, no out=",
    ("F.rrelu", "training"): "None follows lz.Config.train, as dropout's does",
    ("F.dropout", "training"): "None follows lz.Config.train (test_mode() turns it off)",
    ("F.dropout1d", "training"): "as dropout", ("F.dropout2d", "training"): "as dropout",
    ("F.dropout3d", "training"): "as dropout", ("F.alpha_dropout", "training"): "as dropout",
    ("F.grid_sample", "align_corners"): "torch's None means False with a warning; LeZero "
                                        "writes False",
}

# torch's recurrent layers take *args/**kwargs; their documented defaults live on RNNBase.
_RNN_BASE = dict(inspect.signature(torch.nn.RNNBase.__init__).parameters)
_RNN_BASE.pop("self"), _RNN_BASE.pop("mode")


def _torch_parameters(name, cls):
    if name in ("RNN", "LSTM", "GRU"):
        params = dict(_RNN_BASE)
        if name == "RNN":
            params["nonlinearity"] = inspect.Parameter("nonlinearity", 1, default="tanh")
        if name != "LSTM":
            params.pop("proj_size")
        return params
    return dict(inspect.signature(cls).parameters)


def _classes():
    found = []
    for module, twin in ((nn, torch.nn), (optim, torch.optim),
                         (lz_sched, torch.optim.lr_scheduler)):
        for name in sorted(dir(module)):
            ours = getattr(module, name)
            if name.startswith("_") or not inspect.isclass(ours) or not hasattr(twin, name):
                continue
            if name in ("RNNCellBase", "Optimizer", "LRScheduler", "Module"):
                continue             # bases users do not construct
            found.append((name, ours, getattr(twin, name)))
    return found


def _functions():
    found = []
    for op in operators():
        theirs = getattr(TF, op.name, None)
        if theirs is None:
            continue
        try:
            inspect.signature(theirs)
        except (TypeError, ValueError):
            continue                 # a C builtin without a Python signature
        found.append((f"F.{op.name}", getattr(F, op.name), theirs))
    return found


CLASSES = _classes()
FUNCTIONS = _functions()


def _intended(name, arg):
    star = "F.*" if name.startswith("F.") else "*"
    return (name, arg) in INTENDED or (star, arg) in INTENDED or ("*", arg) in INTENDED


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a is b or (type(a) in (int, float) and type(b) in (int, float) and a == b) \
        or (type(a) is type(b) and a == b)


def _compare(name, ours, theirs_params):
    mine = dict(inspect.signature(ours).parameters)
    problems = []
    for arg, p in theirs_params.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty \
                or _intended(name, arg):
            continue
        key = "axis" if arg == "dim" and name.startswith("F.") and arg not in mine else arg
        if key not in mine:
            problems.append(f"{arg} (torch default {p.default!r}) is missing")
        elif not _same(mine[key].default, p.default):
            problems.append(f"{arg}: LeZero {mine[key].default!r}, torch {p.default!r}")
    return problems


@pytest.mark.parametrize("name,ours,theirs", CLASSES, ids=[c[0] for c in CLASSES])
def test_class_defaults_equal_torch(name, ours, theirs):
    assert _compare(name, ours, _torch_parameters(name, theirs)) == []


@pytest.mark.parametrize("name,ours,theirs", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_functional_defaults_equal_torch(name, ours, theirs):
    assert _compare(name, ours, dict(inspect.signature(theirs).parameters)) == []


def test_the_table_covers_the_public_api():
    # If discovery broke, every test above would pass vacuously.
    names = {c[0] for c in CLASSES}
    assert {"LayerNorm", "Linear", "Conv2d", "BatchNorm2d", "CrossEntropyLoss", "LSTM",
            "Adam", "SGD", "LBFGS", "StepLR", "OneCycleLR", "TransformerEncoderLayer"} <= names
    assert len(CLASSES) >= 150 and len(FUNCTIONS) >= 40


def test_every_intended_difference_is_real():
    # A listed difference that no longer differs (or names nothing) is stale: remove it.
    tables = {c[0]: (c[1], _torch_parameters(c[0], c[2])) for c in CLASSES}
    tables.update({f[0]: (f[1], dict(inspect.signature(f[2]).parameters)) for f in FUNCTIONS})
    for (name, arg), why in INTENDED.items():
        assert why
        if "*" in name:
            continue
        assert name in tables, f"INTENDED names {name!r}, which has no torch twin"
        ours, theirs = tables[name]
        assert arg in theirs, f"{name} has no torch argument {arg!r}"
        mine = inspect.signature(ours).parameters
        key = "axis" if arg == "dim" and arg not in mine else arg
        assert key not in mine or not _same(mine[key].default, theirs[arg].default), \
            f"{name}({arg}=...) no longer differs from torch: drop it from INTENDED"
