"""The one mechanism behind elementwise functions of one input, in math and activation.

A subclass of ``Elementwise`` says how to compute the value on a raw array and how to
get the gradient with LeZero operators:

    f(self, xp, x)               the value (``xp`` is numpy or cupy)
    derivative(self, gy, x, y)   gy * f'(x), from the input Variable ``x`` and, where that
                                 is cheaper, the output ``y``

so backward is itself a graph and differentiates again, to any order.  Keyword arguments
of the constructor (alpha, beta, ...) become attributes.  A subclass without
``derivative`` is not differentiable; its wrapper gives it a constant input (see
``unary_operator``), so nothing is recorded.
"""
from lezero.core import Function
from lezero.functions.common import as_variable, operands, xp_of
from lezero.functions.registry import register
from lezero.utils.checks import check_float_array


class Elementwise(Function):
    """``y = f(x)`` elementwise; the gradient is ``derivative(gy, x, y)``."""

    def __init__(self, **params):
        self.__dict__.update(params)

    def forward(self, x):
        return self.f(xp_of(x), x)

    def backward(self, gy):
        return self.derivative(gy, self.inputs[0], self.outputs[0]())

    @classmethod
    def apply_to(cls, op, input, **params):
        """``cls(**params)(input)`` for a floating-point ``input`` (Variable or array); any
        other kind is a TypeError naming the operator ``op`` (the activations' wrappers)."""
        check_float_array(op, "input", input)
        return cls(**params)(input)

    def f(self, xp, x):
        raise NotImplementedError(f"{type(self).__name__}.f")

    def derivative(self, gy, x, y):
        raise NotImplementedError(f"{type(self).__name__} is not differentiable")


FUNCTIONS = {}     # operator name -> its Elementwise class (for exporters and tables)


def unary_operator(name, cls, kinds="f", differentiable=True):
    """Register the math operator ``name(x)`` applying ``cls``: ``x`` may be a Variable,
    an array or a number (of a dtype kind in ``kinds``); a non-differentiable one gets a
    constant input, so its output is a constant."""
    FUNCTIONS[name] = cls

    def op(x):
        (x,) = operands(name, ("x",), (x,), kinds)
        return cls()(x if differentiable else as_variable(x.data))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = cls.__doc__
    op.__module__ = cls.__module__
    return register("math", name=name, differentiable=differentiable)(op)


def float_operator(category, name, cls, doc, kernels=("numpy", "cupy"), **params):
    """Register the operator ``name(input)``: ``cls(**params)`` applied to a floating-point
    ``input`` (the activations without arguments of their own); ``kernels`` as in
    ``register``."""
    def op(input):
        return cls.apply_to(name, input, **params)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    op.__module__ = cls.__module__
    return register(category, name=name, kernels=kernels)(op)
