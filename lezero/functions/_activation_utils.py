"""Argument checks shared by the activation, dropout, softmax and embedding modules."""
import numbers

from lezero.core.config import get_config
from lezero.functions.common import check_float


def check_input(op, x, name="input"):
    """Raise TypeError unless ``x`` is a floating-point Variable or array; return ``x``."""
    check_float(op, name, x)
    return x


def check_real(op, name, value):
    """A real-number argument as a Python float (so it never promotes float32 data)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    return float(value)


def check_probability(op, p):
    """A dropout probability in [0, 1] as a Python float."""
    p = check_real(op, "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability p must be in [0, 1], got {p}")
    return p



def check_training(op, training):
    """The ``training`` flag of a random operator: ``None`` follows ``lz.Config.train``;
    anything but a bool or None is a TypeError naming ``op``."""
    if training is None:
        return get_config().train
    if not isinstance(training, bool):
        raise TypeError(f"{op}: training must be a bool or None, got {type(training).__name__}")
    return training
