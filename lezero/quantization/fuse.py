"""Fusion: fold batch normalization into the layer before it, and merge a layer with the
ReLU after it, so that each becomes one quantized operator.

    fuse(model)                       every run found in Sequential containers (and in
                                      ``fusion_groups`` a module declares), a new model
    fuse(model, [["conv1", "bn1", "relu1"], ...])   the named runs (torch's fuse_modules)
    fuse([conv, bn, relu])            one run of modules -> the fused module

Runs: Conv2d + BatchNorm2d (+ ReLU), Conv2d + ReLU, Linear + BatchNorm1d (+ ReLU),
Linear + ReLU.  Folding uses the running statistics, so the fused model computes what
the original computes in eval mode:

    w' = w * gamma / sqrt(var + eps),   b' = (b - mean) * gamma / sqrt(var + eps) + beta

(in float64, stored as float32; the tests compare the outputs).  The first module of a
run becomes the fused one and the others become ``nn.Identity``, so ``state_dict`` keys
of the rest of the model do not move.  With ``qat=True`` batch norm is kept (``ConvBn2d``,
``ConvBnReLU2d``) for ``prepare_qat``, which simulates the folding while training.
"""
import copy

import numpy as np

from lezero.core import Parameter
from lezero import nn
from lezero.nn import Module, Sequential

__all__ = ["fuse", "fold_bn", "ConvReLU2d", "LinearReLU", "ConvBn2d", "ConvBnReLU2d",
           "FUSED_TYPES"]


class _Fused(Sequential):
    """A fused run: its children are the original modules ("0", "1", ...)."""


class ConvReLU2d(_Fused):
    """Conv2d then ReLU, one quantized operator after convert."""

    def __init__(self, conv, relu):
        super().__init__(conv, relu)


class LinearReLU(_Fused):
    """Linear then ReLU."""

    def __init__(self, linear, relu):
        super().__init__(linear, relu)


class ConvBn2d(_Fused):
    """Conv2d then BatchNorm2d, kept apart for quantization-aware training."""

    def __init__(self, conv, bn):
        super().__init__(conv, bn)


class ConvBnReLU2d(_Fused):
    """Conv2d, BatchNorm2d, ReLU, kept apart for quantization-aware training."""

    def __init__(self, conv, bn, relu):
        super().__init__(conv, bn, relu)


FUSED_TYPES = (ConvReLU2d, LinearReLU, ConvBn2d, ConvBnReLU2d)


def fold_bn(weight, bias, bn):
    """``(w', b')`` float32 arrays: ``weight`` (out, ...) and ``bias`` (or None) with the
    batch norm ``bn``'s running statistics and affine parameters folded in."""
    w = np.asarray(weight, np.float64)
    mean = np.asarray(bn.running_mean, np.float64)
    std = np.sqrt(np.asarray(bn.running_var, np.float64) + bn.eps)
    gamma = np.asarray(bn.weight.data, np.float64) if bn.weight is not None else 1.0
    beta = np.asarray(bn.bias.data, np.float64) if bn.bias is not None else 0.0
    factor = gamma / std
    b = np.zeros(w.shape[0]) if bias is None else np.asarray(bias, np.float64)
    w2 = w * np.reshape(factor, (-1,) + (1,) * (w.ndim - 1))
    b2 = (b - mean) * factor + beta
    return w2.astype(np.float32), b2.astype(np.float32)


def _fold_into(layer, bn):
    """A copy of ``layer`` (Linear or Conv2d) with ``bn`` folded in (a bias is added)."""
    if bn.running_mean is None:
        raise ValueError(f"fuse: {type(bn).__name__} without running statistics "
                         "(track_running_stats=False) cannot be folded")
    if bn.num_features != layer.weight.shape[0]:
        raise ValueError(f"fuse: {type(bn).__name__}({bn.num_features}) does not match the "
                         f"{layer.weight.shape[0]} outputs of {type(layer).__name__}")
    w, b = fold_bn(layer.weight.data, None if layer.bias is None else layer.bias.data, bn)
    new = copy.deepcopy(layer)
    new.weight = Parameter(w)
    new.bias = Parameter(b)
    return new


# (types of the run, builder(modules, qat) -> fused module)
def _conv_bn_relu(mods, qat):
    conv, bn, relu = mods
    return ConvBnReLU2d(conv, bn, relu) if qat else ConvReLU2d(_fold_into(conv, bn), relu)


def _conv_bn(mods, qat):
    return ConvBn2d(*mods) if qat else _fold_into(*mods)


def _linear_bn_relu(mods, qat):
    return LinearReLU(_fold_into(mods[0], mods[1]), mods[2])


_PATTERNS = [
    ((nn.Conv2d, nn.BatchNorm2d, nn.ReLU), _conv_bn_relu),
    ((nn.Conv2d, nn.BatchNorm2d), _conv_bn),
    ((nn.Conv2d, nn.ReLU), lambda mods, qat: ConvReLU2d(*mods)),
    ((nn.Linear, nn.BatchNorm1d, nn.ReLU), _linear_bn_relu),
    ((nn.Linear, nn.BatchNorm1d), lambda mods, qat: _fold_into(*mods)),
    ((nn.Linear, nn.ReLU), lambda mods, qat: LinearReLU(*mods)),
]


def _match(mods):
    """The builder for the longest pattern that ``mods`` starts with, and its length."""
    for types, build in _PATTERNS:
        n = len(types)
        if len(mods) >= n and all(type(m) is t for m, t in zip(mods, types)):
            return build, n
    return None, 0


def fuse_modules_list(mods, qat=False):
    """Fuse one run given as modules; returns the fused module."""
    mods = list(mods)
    build, n = _match(mods)
    if build is None or n != len(mods):
        names = ", ".join(type(m).__name__ for m in mods)
        raise ValueError(f"fuse: cannot fuse ({names}); the runs are Conv2d+BatchNorm2d"
                         "(+ReLU), Conv2d+ReLU, Linear+BatchNorm1d(+ReLU), Linear+ReLU")
    return build(mods, qat)


def _get(model, name):
    m = model
    for part in name.split("."):
        if part not in m._modules:
            raise KeyError(f"fuse: {type(model).__name__} has no submodule {name!r}")
        m = m._modules[part]
    return m


def _set(model, name, value):
    parent_name, _, leaf = name.rpartition(".")
    parent = _get(model, parent_name) if parent_name else model
    setattr(parent, leaf, value)


def _fuse_named(model, names, qat):
    fused = fuse_modules_list([_get(model, n) for n in names], qat)
    _set(model, names[0], fused)
    for n in names[1:]:
        _set(model, n, nn.Identity())


def _fuse_sequential(seq, qat):
    keys = list(seq._modules)
    i = 0
    while i < len(keys):
        mods = [seq._modules[k] for k in keys[i:]]
        build, n = _match(mods)
        if build is None:
            i += 1
            continue
        _fuse_named(seq, keys[i:i + n], qat)
        i += n


def fuse(model, groups=None, qat=False, inplace=False):
    """Fuse conv/linear + batch norm (+ ReLU) runs (see the module docstring).

    ``model``: a Module, or a list/tuple of modules forming one run.  ``groups``: lists
    of submodule names to fuse instead of searching.  ``inplace``: change ``model``
    itself (default: a fused copy, as ``torch.ao.quantization.fuse_modules``)."""
    if isinstance(model, (list, tuple)):
        return fuse_modules_list(model, qat)
    if not isinstance(model, Module):
        raise TypeError(f"fuse: model must be a Module or a list of modules, got "
                        f"{type(model).__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    if groups is not None:
        for names in groups:
            _fuse_named(model, list(names), qat)
        return model
    for prefix, m in list(model.named_modules()):
        for names in getattr(m, "fusion_groups", ()) or ():
            _fuse_named(m, list(names), qat)
    for m in list(model.modules()):
        if isinstance(m, Sequential) and not isinstance(m, _Fused):
            _fuse_sequential(m, qat)
    return model
