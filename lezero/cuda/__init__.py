"""The DeZero-era names of the backend switch, over ``lezero.backends``.

``get_array_module(*args)`` is ``numpy``, ``cupy`` or another backend's namespace (the
strict device's, a plugin's), chosen by the arrays; ``as_numpy`` copies to the host;
``as_cupy``/``to_device`` move to a device: ``as_cupy`` (what ``to_gpu()`` calls) goes to
the default device, ``LEZERO_BACKEND`` or else CuPy.  CuPy is never imported by
``import lezero``: the ``cupy`` backend imports it when a device is asked for.
"""
import numpy as np

from lezero import backends as _backends
from lezero.backends import registry as _registry
from lezero.backends.cupy_backend import GPU_HINT as _GPU_HINT  # noqa: F401  (older callers)
from lezero.backends.cupy_backend import import_cupy as _import_cupy  # noqa: F401

__all__ = ["is_available", "array_types", "get_array_module", "as_array", "as_numpy",
           "as_cupy", "to_device", "device_of"]


def is_available():
    """True when the default device (``LEZERO_BACKEND``, else CuPy with a CUDA device) can
    hold arrays."""
    try:
        return bool(_backends.get(_registry.default_device_name()).is_available())
    except Exception:   # an unknown LEZERO_BACKEND, or a broken plugin
        return False


def array_types():
    """The array classes LeZero accepts: ndarray, plus those of every device in use."""
    return _registry.array_types()


def get_array_module(*args):
    """The array namespace of the first device array (or Variable) among ``args``, else
    ``numpy``."""
    backend = _registry.get_backend(*args)
    return np if backend.is_host else backend.xp


_CONSTANTS = {}         # (backend, device, dtype, value) -> a device 0-d array
_MAX_CONSTANTS = 512


def _device_scalar(x, like):
    """A Python number as a 0-d array on ``like``'s device, uploaded once and reused: an
    operator's ``x * 2.0`` then costs no host-to-device copy per call.  The cached array
    is shared, so operators must never write into a constant's data."""
    backend = _registry.get_backend(like)
    dtype = np.result_type(like.dtype, x)
    if backend.is_host:
        return np.asarray(x, dtype=dtype)
    key = (backend.name, backend.device_of(like), dtype.str, type(x), x)
    value = _CONSTANTS.get(key)
    if value is None:
        if len(_CONSTANTS) >= _MAX_CONSTANTS:
            _CONSTANTS.clear()
        value = _CONSTANTS[key] = backend.from_host(np.asarray(x, dtype=dtype))
        try:
            value.flags.writeable = False   # where a device lets us (strict does), refuse
        except (AttributeError, ValueError):   # writes into the shared constant
            pass
    return value


def as_array(x, like=None):
    """Turn Python data into an array: floats become float32, arrays pass through (the
    conversion ``Variable`` applies to what it is given).

    With ``like`` (an array), a Python scalar takes the dtype NumPy would give it next to
    ``like`` (a float next to float32 stays float32: no silent float64), on ``like``'s
    device.
    """
    if isinstance(x, array_types()):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    if like is not None and isinstance(x, (bool, int, float)):
        return _device_scalar(x, like)
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Variable: cannot convert {type(x).__name__} to an array ({e})") from None
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind not in "biufc":
        raise TypeError(f"Variable: data of dtype {arr.dtype} is not numeric "
                        f"(got {type(x).__name__})")
    return arr


def _data(x):
    if hasattr(x, "creator") and hasattr(x, "data"):      # a Variable
        return x.data
    return x


def as_numpy(x):
    """A NumPy array from a device array, a Variable or a scalar."""
    x = _data(x)
    if isinstance(x, np.ndarray):
        return x
    backend = _registry.get_backend(x)
    if backend.is_host:
        return np.asarray(x)
    return backend.to_host(x)


def to_device(x, name=None, device=None):
    """``x`` (an array or a Variable's array) on backend ``name`` (default: the default
    device, ``LEZERO_BACKEND`` or CuPy), device ``device`` (an int id) when given."""
    target = _backends.get(name or _registry.default_device_name())
    x = _data(x)
    source = _registry.get_backend(x)
    if source is target and device is None:
        return x
    if not source.is_host:
        x = source.to_host(x)
    return target.from_host(x, device) if device is not None else target.from_host(x)


def as_cupy(x, device=None):
    """What ``to_gpu()`` calls: ``x`` on the default device (``LEZERO_BACKEND``, else
    CuPy), on device ``device`` (an int id) when given."""
    return to_device(x, None, device)


def device_of(x):
    """``'cpu'``, ``'cuda:N'`` or ``'<backend>:N'`` for an array or a Variable."""
    x = _data(x)
    backend = _registry.get_backend(x)
    return "cpu" if backend.is_host else backend.device_of(x)
