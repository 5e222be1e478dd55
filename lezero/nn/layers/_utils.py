"""Helpers shared by the layers: parameter creation and PyTorch's default initialisation."""
import math

import numpy as np

from lezero.core import Parameter
from lezero.nn import init


def empty_parameter(*shape, dtype=np.float32):
    """A float32 Parameter to be filled by an initialiser."""
    return Parameter(np.empty(shape, dtype=dtype))


def reset_fan_in_uniform(weight, bias):
    """PyTorch's default for Linear and Conv: kaiming_uniform(a=sqrt(5)) weights and
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) biases."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


def ntuple(value, n, name, layer):
    """An int or a length-n tuple of positive ints, as a tuple."""
    out = (value,) * n if isinstance(value, int) else tuple(value)
    if len(out) != n or not all(isinstance(v, int) for v in out):
        raise ValueError(f"{layer}: {name} must be an int or a tuple of {n} ints, got {value!r}")
    return out


def check_positive(layer, **values):
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")
