"""Modules for quantization-aware training: float layers whose weights pass through a
fake-quantize module (``weight_fake_quant``) on every call, so training sees -- and
adapts to -- the rounding the INT8 model will do.  ``prepare_qat`` swaps them in and
puts a fake-quantize module on each output (``activation_post_process``).

``QATConvBn2d`` / ``QATConvBnReLU2d`` keep batch normalization while training, as
PyTorch's ``ConvBn2d`` does (Jacob et al. 2018, section 3.2): the weight is scaled by
``gamma / sqrt(running_var + eps)`` *before* it is fake quantized -- exactly the folded
weight the INT8 convolution will hold -- the convolution's output is divided by the same
factor, and batch norm is applied on top with batch statistics.  ``freeze_bn_stats``
switches batch norm to its running statistics (the usual last epochs of QAT); the layer
then computes ``conv(x, fq(w_folded)) + b_folded``, what ``convert`` produces.
"""
import numpy as np

import lezero.functions as F
from lezero import nn
from lezero.nn import Module
from lezero.quantization.fuse import ConvBn2d, ConvBnReLU2d, ConvReLU2d, LinearReLU

__all__ = ["QATLinear", "QATLinearReLU", "QATConv2d", "QATConvReLU2d", "QATConvBn2d",
           "QATConvBnReLU2d", "freeze_bn_stats", "update_bn_stats", "QAT_MODULE_MAPPING"]


def _adopt(new, mod, qconfig):
    """Give ``new`` (a bare instance) the float module ``mod``'s configuration and its
    very Parameters, plus a weight fake-quantize module from ``qconfig``."""
    Module.__init__(new)
    for key, value in vars(mod).items():
        if not key.startswith("_") and key != "training":
            object.__setattr__(new, key, value)
    new.weight = mod.weight
    if mod.bias is None:
        new.register_parameter("bias", None)
    else:
        new.bias = mod.bias
    new.qconfig = qconfig
    new.weight_fake_quant = qconfig.weight()
    object.__setattr__(new, "training", mod.training)
    return new


class _QAT:
    """Shared by the QAT layers: built from a float layer (or a fused layer + ReLU)."""

    relu = False

    @classmethod
    def from_float(cls, mod, qconfig):
        layer = mod[0] if isinstance(mod, (LinearReLU, ConvReLU2d)) else mod
        return _adopt(cls.__new__(cls), layer, qconfig)

    def _activation(self, y):
        return F.relu(y) if self.relu else y


class QATLinear(_QAT, nn.Linear):
    """Linear with a fake-quantized weight."""

    def forward(self, x):
        return self._activation(F.linear(x, self.weight_fake_quant(self.weight), self.bias))


class QATLinearReLU(QATLinear):
    """Linear + ReLU with a fake-quantized weight."""

    relu = True


class QATConv2d(_QAT, nn.Conv2d):
    """Conv2d with a fake-quantized weight."""

    def forward(self, x):
        self._check_input(x)
        x, padding = self._pad_explicitly(x)
        return self._activation(F.conv2d(x, self.weight_fake_quant(self.weight), self.bias,
                                         self.stride, padding, self.dilation, self.groups))


class QATConvReLU2d(QATConv2d):
    """Conv2d + ReLU with a fake-quantized weight."""

    relu = True


class QATConvBn2d(QATConv2d):
    """Conv2d + BatchNorm2d trained with the folding simulated (module docstring);
    the batch norm is the child ``bn`` (its keys ``bn.weight``, ``bn.running_mean``...)."""

    relu = False

    @classmethod
    def from_float(cls, mod, qconfig):
        new = _adopt(cls.__new__(cls), mod[0], qconfig)
        new.bn = mod[1]
        new.freeze_bn = False
        return new

    def folding_factor(self):
        """gamma / sqrt(running_var + eps): a Variable when gamma is a Parameter."""
        bn = self.bn
        std = np.sqrt(bn.running_var + np.float32(bn.eps)).astype(np.float32)
        return (bn.weight / std) if bn.weight is not None else 1.0 / std

    def forward(self, x):
        self._check_input(x)
        x, padding = self._pad_explicitly(x)
        factor = self.folding_factor()
        w = self.weight_fake_quant(self.weight * F.reshape(factor, (-1, 1, 1, 1)))
        y = F.conv2d(x, w, None, self.stride, padding, self.dilation, self.groups)
        y = y / F.reshape(factor, (1, -1, 1, 1))
        if self.bias is not None:
            y = y + F.reshape(self.bias, (1, -1, 1, 1))
        # batch statistics while training, unless frozen (then the running ones)
        object.__setattr__(self.bn, "training", self.training and not self.freeze_bn)
        return self._activation(self.bn(y))

    def freeze_bn_stats(self):
        self.freeze_bn = True
        return self

    def update_bn_stats(self):
        self.freeze_bn = False
        return self


class QATConvBnReLU2d(QATConvBn2d):
    """Conv2d + BatchNorm2d + ReLU, trained with the folding simulated."""

    relu = True


def freeze_bn_stats(model):
    """Batch norm inside every QAT conv-bn module of ``model`` uses (and no longer
    updates) its running statistics; returns ``model`` (usable with ``model.apply``)."""
    for m in model.modules():
        if isinstance(m, QATConvBn2d):
            m.freeze_bn_stats()
    return model


def update_bn_stats(model):
    """Undo ``freeze_bn_stats``."""
    for m in model.modules():
        if isinstance(m, QATConvBn2d):
            m.update_bn_stats()
    return model


QAT_MODULE_MAPPING = {
    nn.Linear: QATLinear, LinearReLU: QATLinearReLU,
    nn.Conv2d: QATConv2d, ConvReLU2d: QATConvReLU2d,
    ConvBn2d: QATConvBn2d, ConvBnReLU2d: QATConvBnReLU2d,
}
