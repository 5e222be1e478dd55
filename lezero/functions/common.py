"""The few helpers every operator family uses: the array module, the array behind an
argument, and turning arguments into Variables (``as_variable`` for one, ``operands`` for
an operator's validated array arguments).

Argument checks live in ``lezero.utils.checks`` (one rule for error kinds everywhere);
shape arithmetic of a family lives in that family.
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable, as_array, get_config
from lezero.utils.checks import kind_of


def data_of(x):
    """The raw array behind a Variable, array or scalar."""
    return x.data if isinstance(x, Variable) else x


def xp_of(*xs):
    """The array module (numpy or cupy) of the given Variables/arrays."""
    return cuda.get_array_module(*xs)


def as_variable(x, like=None, dtype=None):
    """A Variable for an operator's argument: Variables pass through; arrays and Python
    numbers become constants (no gradient flows into them).

    This is ``lezero.core.as_variable`` with the operators' dtype rules: a Python number
    takes the dtype NumPy gives it next to ``like`` (so ``x32 * 2.0`` stays float32), and
    ``dtype`` casts the array (a boolean mask picking pieces of a piecewise function
    becomes 0s and 1s in the data's dtype).
    """
    if isinstance(x, Variable):
        return x
    if type(x) is not np.ndarray:
        x = as_array(x, None if like is None else data_of(like))
    if dtype is not None:
        x = x.astype(dtype, copy=False)
    return Variable(x, requires_grad=False)


_KIND_NAMES = {"b": "bool", "i": "signed int", "u": "unsigned int", "f": "floating point"}


def operands(op, names, values, kinds="biuf"):
    """Variables for an operator's array arguments, validated.

    Variables pass through; arrays and Python numbers become constants.  A Python number
    takes the dtype NumPy gives it next to the first array argument, so ``x32 * 2.0``
    stays float32.  ``kinds`` lists the accepted dtype kinds (``"f"``: floating only).
    Raises TypeError naming ``op`` and the argument.
    """
    like = None
    for v in values:
        if isinstance(v, Variable):
            like = v.data
            break
        if isinstance(v, cuda.array_types()):
            like = v
            break
    out = []
    for name, v in zip(names, values):
        if isinstance(v, Variable):
            var = v
        elif isinstance(v, (bool, int, float, np.generic)) or isinstance(v, cuda.array_types()):
            var = as_variable(v, like)
        else:
            raise TypeError(f"{op}: {name} must be a Variable, an ndarray or a Python number, "
                            f"got {type(v).__name__}")
        kind = kind_of(var.data.dtype)
        if kind not in kinds:
            wanted = " or ".join(_KIND_NAMES[k] for k in kinds)
            raise TypeError(f"{op}: {name} must be {wanted}, got dtype {var.data.dtype}")
        out.append(var)
    return out


def mixed_precision(*dtypes):
    """True when ``dtypes`` mix float32 with float16/bfloat16 inside an ``amp.autocast``
    region (which casts per operator): a dtype check must then let them through, as torch's
    do under autocast.  Outside a region mixed dtypes stay an error."""
    return (all(d == np.float32 or (kind_of(d) == "f" and d.itemsize == 2) for d in dtypes)
            and in_autocast())


def in_autocast():
    """Whether an ``amp.autocast`` region is active on this thread (its hook's flag: the
    functions sit below amp)."""
    return any(getattr(h, "is_autocast", False) for h in get_config().function_hooks)


def inverse_permutation(perm):
    """The permutation that undoes ``perm`` (a sequence of axes): ``inv[perm[i]] = i``."""
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return tuple(inverse)
