"""The eager-mode flows, as ``torch.ao.quantization``'s:

    post-training   fused = quantization.fuse(model.eval())
                    prepared = quantization.prepare(fused)        # observers on outputs
                    quantization.calibrate(prepared, batches)     # a few batches, no grad
                    int8 = quantization.convert(prepared)         # INT8 modules
    aware training  prepared = quantization.prepare_qat(quantization.fuse(model, qat=True))
                    ... train prepared ... (freeze_bn_stats near the end)
                    int8 = quantization.convert(prepared.eval())

Which layers: every module whose ``qconfig`` (its own attribute, else its parent's; the
root's defaults to ``default_qconfig`` / ``default_qat_qconfig``) is not None.  The model
says where float data becomes integers with ``QuantStub``/``DeQuantStub`` (or is wrapped
in ``QuantWrapper``).  ``prepare`` puts an observer (``activation_post_process``, a child
module run by a forward hook) on the output of each stub, Linear, Conv2d and fused run,
and into each ``FloatFunctional``; ReLU, pooling, flatten and dropout keep their input's
scale, so they get none.  ``convert`` swaps modules by type (``STATIC_MAPPING``) for the
INT8 modules of ``modules.py``; a float layer left in a converted model refuses quantized
input with a message naming it.  All three copy the model unless ``inplace=True``.
"""
import copy
import warnings

from lezero import nn
from lezero.core import no_grad
from lezero.nn import Module
from lezero.quantization import modules as qm
from lezero.quantization.fake_quant import FakeQuantizeBase
from lezero.quantization.fuse import ConvBn2d, ConvBnReLU2d, ConvReLU2d, LinearReLU
from lezero.quantization.observers import ObserverBase
from lezero.quantization.qat import (QAT_MODULE_MAPPING, QATConv2d, QATConvBn2d,
                                     QATConvBnReLU2d, QATConvReLU2d, QATLinear, QATLinearReLU)
from lezero.quantization.qconfig import QConfig, default_qat_qconfig, default_qconfig
from lezero.quantization.qtensor import refuse_quantized
from lezero.quantization.stubs import DeQuantStub, FloatFunctional, QuantStub

__all__ = ["prepare", "prepare_qat", "calibrate", "convert", "STATIC_MAPPING",
           "OBSERVED_TYPES", "PASSTHROUGH_TYPES"]


def _identity(mod):
    return nn.Identity()


STATIC_MAPPING = {
    QuantStub: qm.Quantize, DeQuantStub: qm.DeQuantize,
    nn.Linear: qm.QuantLinear, QATLinear: qm.QuantLinear,
    LinearReLU: qm.QuantLinearReLU, QATLinearReLU: qm.QuantLinearReLU,
    nn.Conv2d: qm.QuantConv2d, QATConv2d: qm.QuantConv2d, QATConvBn2d: qm.QuantConv2d,
    ConvBn2d: qm.QuantConv2d,
    ConvReLU2d: qm.QuantConvReLU2d, QATConvReLU2d: qm.QuantConvReLU2d,
    QATConvBnReLU2d: qm.QuantConvReLU2d, ConvBnReLU2d: qm.QuantConvReLU2d,
    nn.ReLU: qm.QuantReLU, nn.ReLU6: qm.QuantReLU6,
    nn.MaxPool2d: qm.QuantMaxPool2d, nn.AvgPool2d: qm.QuantAvgPool2d,
    nn.AdaptiveAvgPool2d: qm.QuantAdaptiveAvgPool2d,
    FloatFunctional: qm.QFunctional,
    nn.Dropout: _identity, nn.Dropout2d: _identity,
}
# Modules whose output gets an observer: they compute values on a new scale.
OBSERVED_TYPES = (QuantStub, nn.Linear, nn.Conv2d, LinearReLU, ConvReLU2d, ConvBn2d,
                  ConvBnReLU2d) + tuple(QAT_MODULE_MAPPING.values())
# Modules that work on quantized tensors as they are (views, or nothing at all).
PASSTHROUGH_TYPES = (nn.Identity, nn.Flatten, nn.Unflatten, nn.Sequential, nn.ModuleList,
                     nn.ModuleDict, DeQuantStub)


def _observe_output(module, args, output):
    return module.activation_post_process(output)


def _check_qconfig(qconfig, where):
    if qconfig is not None and not isinstance(qconfig, QConfig):
        raise TypeError(f"{where}: qconfig must be a quantization.QConfig or None, got "
                        f"{type(qconfig).__name__}")
    return qconfig


def _start(model, qconfig, default, inplace, where):
    if not isinstance(model, Module):
        raise TypeError(f"{where}: model must be an nn.Module, got {type(model).__name__}")
    _check_qconfig(qconfig, where)
    if not inplace:
        model = copy.deepcopy(model)
    if qconfig is not None:
        model.qconfig = qconfig
    elif "qconfig" not in model.__dict__:
        model.qconfig = default
    return model


def _attach(module, inherited, qat):
    """Propagate qconfigs (every module gets ``.qconfig``), swap in QAT modules, attach
    output observers (or fake-quantize modules) below ``module``."""
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        q = _check_qconfig(child.__dict__.get("qconfig", inherited), "prepare")
        if qat and q is not None and type(child) in QAT_MODULE_MAPPING:
            child = QAT_MODULE_MAPPING[type(child)].from_float(child, q)
            setattr(module, name, child)
        child.qconfig = q
        if isinstance(child, (ObserverBase, FakeQuantizeBase)):
            continue
        if q is not None and isinstance(child, FloatFunctional):
            child.activation_post_process = q.activation()
        elif q is not None and isinstance(child, OBSERVED_TYPES):
            if "activation_post_process" not in child._modules:
                child.activation_post_process = q.activation()
                child.register_forward_hook(_observe_output)
        else:
            _attach(child, q, qat)


def prepare(model, qconfig=None, inplace=False):
    """The model with observers on the outputs of its quantizable layers (see the module
    docstring); run ``calibrate`` on it, then ``convert``."""
    model = _start(model, qconfig, default_qconfig, inplace, "prepare")
    _attach(model, model.qconfig, qat=False)
    return model


def prepare_qat(model, qconfig=None, inplace=False):
    """The model with QAT layers (fake-quantized weights) and fake-quantize modules on
    the outputs, in training mode; train it, then ``convert``."""
    model = _start(model, qconfig, default_qat_qconfig, inplace, "prepare_qat")
    _attach(model, model.qconfig, qat=True)
    return model.train()


def calibrate(model, batches, max_batches=None):
    """Run a prepared model on ``batches`` (arrays, Variables, or tuples whose first
    entry is the input) in eval mode without a graph, so its observers see the data;
    returns ``model``.  ``max_batches`` stops early."""
    was_training = model.training
    model.eval()
    with no_grad():
        for i, batch in enumerate(batches):
            if max_batches is not None and i >= max_batches:
                break
            model(batch[0] if isinstance(batch, (tuple, list)) else batch)
    model.train(was_training)
    return model


def _observers_without_data(model):
    return [name for name, m in model.named_modules()
            if isinstance(m, ObserverBase) and not m.has_data()]


def _swap(module, mapping, prefix):
    from lezero.quantization.sensitivity import FloatFallback
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        qual = f"{prefix}{name}"
        if getattr(child, "keep_float", False):
            new = FloatFallback.from_float(child)
        elif type(child) in mapping and child.__dict__.get("qconfig") is not None:
            new = mapping[type(child)].from_float(child)
        else:
            _swap(child, mapping, qual + ".")
            continue
        object.__setattr__(new, "_qname", qual)
        setattr(module, name, new)


def _guard_float_layers(model):
    quantized = tuple(t for t in STATIC_MAPPING.values() if isinstance(t, type))
    for name, m in model.named_modules():
        object.__setattr__(m, "_qname", getattr(m, "_qname", None) or name or None)
        if m._modules or isinstance(m, quantized + PASSTHROUGH_TYPES):
            continue
        if not getattr(m, "_refuses_quantized", False):
            m.register_forward_pre_hook(refuse_quantized)
            object.__setattr__(m, "_refuses_quantized", True)


def convert(model, mapping=None, inplace=False, warn=True):
    """The INT8 model: each prepared layer swapped for its quantized module (weights
    quantized with their observer, outputs with the observed scale and zero point); in
    eval mode.  ``mapping``: {float type: class with ``from_float``} (default
    ``STATIC_MAPPING``).  ``warn``: warn about observers that saw no data (calibrate
    first; a model converted only to receive ``load_state_dict`` needs none)."""
    if not isinstance(model, Module):
        raise TypeError(f"convert: model must be an nn.Module, got {type(model).__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    empty = _observers_without_data(model)
    if warn and empty:
        warnings.warn(f"convert: {len(empty)} observers saw no data ({', '.join(empty[:4])}"
                      f"{' ...' if len(empty) > 4 else ''}); their layers get scale 1, zero "
                      "point 0. Run quantization.calibrate(model, batches) first",
                      stacklevel=2)
    _swap(model, mapping or STATIC_MAPPING, "")
    _guard_float_layers(model)
    return model.eval()
