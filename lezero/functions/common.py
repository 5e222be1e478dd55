"""Small helpers shared by the operator modules: argument checks and gradient reshaping."""
import numpy as np

from lezero import cuda
from lezero.core import Variable, as_array


def data_of(x):
    """The raw array behind a Variable, array or scalar."""
    return x.data if isinstance(x, Variable) else x


def xp_of(*xs):
    """The array module (numpy or cupy) of the given Variables/arrays."""
    return cuda.get_array_module(*xs)


def _rows_kernel_applies(target, index, values):
    """Whole rows picked by a 1-D integer index: the Numba kernel's case."""
    from lezero import kernels
    return (isinstance(index, np.ndarray) and index.ndim == 1 and index.dtype.kind in "iu"
            and target.ndim >= 1 and target.flags.c_contiguous and target.dtype.kind == "f"
            and getattr(values, "shape", None) == index.shape + target.shape[1:]
            and kernels.enabled(target))


def scatter_add_(target, index, values):
    """``target[index] += values`` in place, where repeated indices all add up (a plain
    ``+=`` would keep only one of them)."""
    if xp_of(target) is np:
        if _rows_kernel_applies(target, index, values):
            from lezero.kernels.scatter import scatter_add_rows_
            scatter_add_rows_(target, index, values)
        else:
            np.add.at(target, index, values)
    else:
        import cupyx
        cupyx.scatter_add(target, index, values)


def check_variable(op, name, x):
    """Raise TypeError unless ``x`` is a Variable or an array; return its array."""
    if isinstance(x, Variable):
        return x.data
    if isinstance(x, cuda.array_types()):
        return x
    raise TypeError(f"{op}: {name} must be a Variable or an ndarray, got {type(x).__name__}")


def check_float(op, name, x):
    """Raise TypeError unless ``x`` holds floating-point data."""
    arr = check_variable(op, name, x)
    if arr.dtype.kind != "f":
        raise TypeError(f"{op}: {name} must be floating point, got dtype {arr.dtype}")
    return arr


def check_bool(op, name, value):
    """Raise TypeError unless ``value`` is a bool (NumPy's too); return it as a bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {type(value).__name__}")
    return bool(value)


def normalize_axis(op, axis, ndim, name="axis"):
    """One axis in [0, ndim), with a clear error (naming the argument ``name``) when it is
    not an int or out of range."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {type(axis).__name__}")
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op}: {name} {axis} is out of range for an input with {ndim} dims")
    return int(axis) % max(ndim, 1)


def normalize_axes(op, axis, ndim):
    """None (all axes) or a sorted tuple of distinct axes in [0, ndim)."""
    if axis is None:
        return None
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = tuple(sorted(normalize_axis(op, a, ndim) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return out


def inverse_permutation(perm):
    """The permutation that undoes ``perm`` (a sequence of axes): ``inv[perm[i]] = i``."""
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return tuple(inverse)


def keepdims_shape(shape, axes):
    """The shape a reduction over ``axes`` has with keepdims=True."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def reduced_shape(shape, axes):
    """The shape a reduction over ``axes`` (all axes when None) has without keepdims."""
    if axes is None:
        return ()
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def constant(array):
    """A Variable that no gradient flows into."""
    return Variable(array, requires_grad=False)


def mask_like(x, values):
    """A constant Variable holding ``values`` (a boolean or numeric array) in ``x``'s dtype.

    Masks pick pieces of piecewise functions; being constants, their derivative is 0.
    """
    return constant(values.astype(data_of(x).dtype, copy=False))


def as_input(x, like=None):
    """A Variable for an operator argument (arrays and scalars become constants)."""
    if isinstance(x, Variable):
        return x
    return Variable(as_array(x, None if like is None else data_of(like)), requires_grad=False)
