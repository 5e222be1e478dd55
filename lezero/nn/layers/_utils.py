"""Helpers shared by the layers: parameter creation, PyTorch's default initialisation,
``named_errors``, and ``op_module`` (a layer made from an operator and an argument spec).
Argument checks come from ``lezero.utils.checks``."""
import contextlib
import inspect
import math

import numpy as np

from lezero import cuda
from lezero.core import Parameter, Variable
from lezero.nn import init
from lezero.nn.module import Module
from lezero.utils.checks import (check_bool, check_choice, check_int, check_number, describe,
                                 is_int)


def empty_parameter(*shape, dtype=np.float32):
    """A float32 Parameter to be filled by an initialiser."""
    return Parameter(np.empty(shape, dtype=dtype))


def weight_and_bias(module, weight_shape, bias_size, bias):
    """Give ``module`` a ``weight`` of ``weight_shape`` and, when ``bias``, a ``bias`` of
    ``bias_size`` entries (else ``bias`` is registered as None, as PyTorch does)."""
    module.weight = empty_parameter(*weight_shape)
    if bias:
        module.bias = empty_parameter(bias_size)
    else:
        module.register_parameter("bias", None)


def reset_fan_in_uniform(weight, bias):
    """PyTorch's default for Linear and Conv: kaiming_uniform(a=sqrt(5)) weights and
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) biases."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


@contextlib.contextmanager
def named_errors(layer):
    """Prefix the ValueError/TypeError an operator raises with the calling layer's name,
    so a bad input reads as ``Softmax: softmax: ...`` rather than as an operator detail."""
    try:
        yield
    except (ValueError, TypeError) as e:
        raise type(e)(f"{layer}: {e}") from e


# ----- modules made from an operator and an argument spec --------------------------------

REQUIRED = object()      # the default of a spec argument that must be given


def _check_arg(layer, name, value, kind):
    if kind == "any":                        # checked by the operator, named by named_errors
        return
    if kind == "number":
        check_number(layer, name, value)
    elif kind == "bool":
        check_bool(layer, name, value)
    elif kind in ("int", "int?"):
        check_int(layer, name, value, allow_none=kind == "int?")
    elif kind in ("size", "size?"):            # an int or a tuple of ints (None allowed in
        entries = value if isinstance(value, (tuple, list)) else (value,)   # "size?")
        if value is None and kind == "size?":
            return
        if not entries or not all(is_int(v) or (v is None and kind == "size?")
                                  for v in entries):
            raise TypeError(f"{layer}: {name} must be an int or a tuple of ints, got "
                            f"{describe(value)}")
    else:                                    # a tuple of allowed values
        check_choice(layer, name, value, kind)


class OpModule(Module):
    """A layer that applies one operator with the options it was built with.

    Subclasses (made by ``op_module``) carry ``_fn``, ``_spec`` -- PyTorch's constructor
    arguments as (name, default, kind) -- and ``_n_inputs``.  The constructor binds and
    checks the arguments and stores them as attributes (a "buffer" argument as a buffer,
    so it is saved in ``state_dict`` as PyTorch saves a loss's ``weight``);
    ``forward(*inputs)`` calls ``_fn(*inputs, **options)``, where a ``dim`` option is passed
    as ``axis`` and the arguments named in ``_not_passed`` are left out (``inplace`` is
    accepted for compatibility only: LeZero's operators never overwrite an input).
    """

    _spec = ()
    _n_inputs = 1
    _not_passed = ("inplace",)
    _passed = ()              # (operator keyword, attribute) pairs, set by op_module

    def __init__(self, *args, **kwargs):
        super().__init__()
        name = type(self).__name__
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}: {e}") from None
        bound.apply_defaults()
        kinds = {arg: kind for arg, _, kind in self._spec}
        for arg, value in bound.arguments.items():
            if kinds[arg] == "buffer":
                self.register_buffer(arg, _as_buffer(name, arg, value))
            else:
                _check_arg(name, arg, value, kinds[arg])
                setattr(self, arg, value)
        self._validate()

    def _validate(self):
        """Checks that involve several arguments (overridden where needed)."""

    def _options(self):
        # Read at every call: an attribute changed after construction takes effect.
        return {key: getattr(self, arg) for key, arg in self._passed}

    def forward(self, *inputs):
        if len(inputs) != self._n_inputs:
            raise TypeError(f"{type(self).__name__}: forward takes {self._n_inputs} "
                            f"input(s), got {len(inputs)}")
        try:                      # inline rather than named_errors: this is a hot path
            return self._fn(*inputs, **self._options())
        except (ValueError, TypeError) as e:
            raise type(e)(f"{type(self).__name__}: {e}") from e

    def extra_repr(self):
        return ", ".join(f"{arg}={getattr(self, arg)!r}" for arg, _, kind in self._spec
                         if kind != "buffer" and (arg not in self._not_passed
                                                  or arg == "inplace" and self.inplace))


def _as_buffer(layer, name, value):
    """None, or the value as a float array: float32 (LeZero's default for converted data),
    unless it already is a float32 or float16 array, which is kept (NumPy or CuPy)."""
    if value is None:
        return None
    value = value.data if isinstance(value, Variable) else value
    if isinstance(value, cuda.array_types()):
        return value if value.dtype in (np.float32, np.float16) else value.astype(np.float32)
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise TypeError(f"{layer}: {name} must be an array of numbers or None, got "
                        f"{type(value).__name__}") from None


def op_module(fn, *spec, n_inputs=1, base=OpModule):
    """A base class for a layer applying ``fn`` (see ``OpModule``).  ``spec`` lists the
    constructor arguments as (name, default, kind); kinds: "number", "bool",
    "int", "int?" (int or None), "size" (an int or a tuple of ints), "size?" (the same,
    None allowed, also as an entry), "buffer" (an array or None, registered as a buffer),
    "any" (left to the operator) or a tuple of allowed values.  A default of ``REQUIRED``
    makes the argument required; a "*" entry makes the arguments after it keyword-only."""
    params, kind = [], inspect.Parameter.POSITIONAL_OR_KEYWORD
    for item in spec:
        if item == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        arg, default, _ = item
        params.append(inspect.Parameter(
            arg, kind, default=inspect.Parameter.empty if default is REQUIRED else default))
    spec = tuple(item for item in spec if item != "*")
    passed = tuple(("axis" if arg == "dim" else arg, arg) for arg, _, _ in spec
                   if arg not in base._not_passed)
    return type(base.__name__, (base,), {"_fn": staticmethod(fn), "_spec": spec,
                                         "_passed": passed, "_n_inputs": n_inputs,
                                         "__signature__": inspect.Signature(params)})


# ----- lazy layers -----------------------------------------------------------------------

class LazyModule(Module):
    """A layer whose input size -- the eager layer's first constructor argument
    (``in_features``, ``in_channels``, ``num_features``) -- is read off its first input.

    Subclasses are made by ``lazy_layer``, which sets ``_eager`` (the layer to become),
    ``_infer`` (``infer(layer, input)``: checks the input's rank and returns the size) and
    ``__signature__`` (the eager constructor's arguments after the first).  The constructor
    binds the arguments and keeps them; they are checked when the layer materialises.
    Until then ``weight`` and ``bias`` are None and there are no parameters or buffers.

    The first call (or ``initialize_parameters(input)``) runs the eager constructor on this
    very object, keeping its mode and hooks; from then on it is the eager layer in all but
    its class name: the same attributes, parameters, buffers, state_dict and forward.
    """

    _eager = None
    _infer = None

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{type(self).__name__}: {e}") from None
        bound.apply_defaults()
        self._lazy_arguments = dict(bound.arguments)
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)

    def has_uninitialized_params(self):
        """True until the first input has fixed the parameters' shapes."""
        return self._lazy_arguments is not None

    def initialize_parameters(self, input):
        """Materialise from ``input`` (nothing happens once materialised)."""
        if not self.has_uninitialized_params():
            return
        size = self._infer(self, input)
        before = dict(self.__dict__)
        self._lazy_arguments = None          # so that reset_parameters below does its work
        try:
            self._eager.__init__(self, size, **before["_lazy_arguments"])
        except Exception:
            self.__dict__.clear()            # a bad argument: stay lazy, as before the call
            self.__dict__.update(before)
            raise
        # Module.__init__ (run by the eager constructor) reset the mode and the hooks.
        for name in ("training", "_forward_hooks", "_forward_pre_hooks"):
            object.__setattr__(self, name, before[name])

    def reset_parameters(self):
        if not self.has_uninitialized_params():
            super().reset_parameters()

    def forward(self, input):
        self.initialize_parameters(input)
        return super().forward(input)

    def extra_repr(self):
        if not self.has_uninitialized_params():
            return super().extra_repr()
        return ", ".join(f"{name}={value!r}" for name, value in self._lazy_arguments.items())


def lazy_layer(eager, infer, **defaults):
    """A base class for the lazy version of the layer class ``eager`` (see ``LazyModule``):
    its constructor takes ``eager``'s arguments but the first, with ``defaults`` replacing
    some defaults (PyTorch's lazy instance norms default to ``affine=True``)."""
    params = list(inspect.signature(eager).parameters.values())[1:]
    params = [p.replace(default=defaults.get(p.name, p.default)) for p in params]
    return type(f"Lazy{eager.__name__}", (LazyModule, eager),
                {"_eager": eager, "_infer": staticmethod(infer),
                 "__signature__": inspect.Signature(params)})
