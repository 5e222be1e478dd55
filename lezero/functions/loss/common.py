"""Pieces the losses share: argument checks (reduction strings, float inputs, matching
shapes) and ``reduce_loss``, the 'none' / 'mean' /
'sum' step at the end of most losses.

The losses themselves are built from the public operators (``abs``, ``clip``,
``logsigmoid``, ``log_softmax``, ``norm`` ...), whose backwards are written with LeZero
operators, so every composed loss can be differentiated to any order.
"""
from lezero.functions.common import as_variable, data_of, mixed_precision
from lezero.functions.reduction import sum as _sum
from lezero.utils.checks import check_float_array

REDUCTIONS = ("none", "mean", "sum")


# ----- argument checks -----------------------------------------------------------------

def check_reduction(op, reduction, allowed=REDUCTIONS):
    """Raise TypeError unless ``reduction`` is a str, ValueError unless one of ``allowed``."""
    if not isinstance(reduction, str):
        raise TypeError(f"{op}: reduction must be a str (one of "
                        f"{', '.join(map(repr, allowed))}), got {type(reduction).__name__}")
    if reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {', '.join(map(repr, allowed))}, "
                         f"got {reduction!r}")
    return reduction


def check_same_shape(op, name_a, a, name_b, b):
    """Raise ValueError unless the arrays behind ``a`` and ``b`` have one shape."""
    sa, sb = data_of(a).shape, data_of(b).shape
    if sa != sb:
        raise ValueError(f"{op}: {name_b} has shape {sb} but {name_a} has shape {sa}; "
                         "they must be equal")


def check_floats(op, **named):
    """``check_float`` for each keyword (name=value); also require one common dtype."""
    dtypes = {}
    for name, value in named.items():
        dtypes[name] = check_float_array(op, name, value).dtype
    if len(set(dtypes.values())) > 1 and not mixed_precision(*dtypes.values()):
        got = ", ".join(f"{n} {d}" for n, d in dtypes.items())
        raise TypeError(f"{op}: inputs must share one floating dtype, got {got}")


def check_pair(op, input, target, reduction, reductions=REDUCTIONS):
    """The checks of a loss between ``input`` and a same-shaped float ``target``; returns
    both as Variables (arrays become constants)."""
    check_reduction(op, reduction, reductions)
    check_floats(op, input=input, target=target)
    check_same_shape(op, "input", input, "target", target)
    return as_variable(input), as_variable(target)


# ----- reductions ----------------------------------------------------------------------

def reduce_loss(loss, reduction):
    """Apply 'none' (unchanged), 'sum' or 'mean' (over all elements) to a loss Variable."""
    if reduction == "none":
        return loss
    total = _sum(loss)
    if reduction == "sum":
        return total
    return total / loss.size
