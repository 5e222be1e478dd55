"""Markers of eager-mode quantization: where float data becomes integers and back, and
the float arithmetic that convert() turns into integer arithmetic.

* ``QuantStub`` / ``DeQuantStub``: the identity in a float model; ``prepare`` observes the
  QuantStub's output, and ``convert`` swaps them for ``Quantize`` / ``DeQuantize``.
* ``QuantWrapper(module)``: ``DeQuantStub(module(QuantStub(x)))``.
* ``FloatFunctional``: ``add``, ``add_relu``, ``mul`` and ``cat`` as a module, so that the
  result has an observer (``activation_post_process``) and converts to ``QFunctional``.
  Write ``self.skip = FloatFunctional()`` and ``self.skip.add(out, identity)`` instead of
  ``out + identity`` in a model you want to quantize.
"""
import lezero.functions as F
from lezero.nn import Identity, Module

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper", "FloatFunctional"]


class _Stub(Module):
    """The identity, with an optional QConfig of its own."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig is not None:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantStub(_Stub):
    """Where float values enter the quantized part of a model (the identity until
    ``convert``).  ``qconfig``: this stub's own QConfig (default: the model's)."""


class DeQuantStub(_Stub):
    """Where quantized values return to float (the identity until ``convert``)."""


class QuantWrapper(Module):
    """``module`` between a QuantStub and a DeQuantStub: quantizes all of it."""

    def __init__(self, module):
        super().__init__()
        self.quant = QuantStub()
        self.module = module
        self.dequant = DeQuantStub()
        if "qconfig" in getattr(module, "__dict__", {}):
            self.qconfig = module.qconfig

    def forward(self, *args):
        return self.dequant(self.module(*[self.quant(a) for a in args]))


class FloatFunctional(Module):
    """Float ``add``/``add_relu``/``mul``/``cat`` whose results pass through
    ``activation_post_process`` (the identity until ``prepare`` puts an observer there)."""

    def __init__(self):
        super().__init__()
        self.activation_post_process = Identity()

    def forward(self, *args):
        raise RuntimeError("FloatFunctional is not called directly: use its add, add_relu, "
                           "mul or cat method")

    def add(self, a, b):
        return self.activation_post_process(a + b)

    def add_relu(self, a, b):
        return self.activation_post_process(F.relu(a + b))

    def mul(self, a, b):
        return self.activation_post_process(a * b)

    def cat(self, xs, axis=0):
        return self.activation_post_process(F.concatenate(list(xs), axis=axis))
