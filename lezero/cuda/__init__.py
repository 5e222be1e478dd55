"""The backend switch: NumPy on the CPU, CuPy on the GPU, the same operator code for both.

CuPy is never imported by ``import lezero``: it is looked up in ``sys.modules`` (so arrays a
user made with CuPy are recognised) and imported only by ``is_available``, ``as_cupy`` and
``Variable.to_gpu``.
"""
import sys

import numpy as np

_GPU_HINT = "CuPy is required for GPU arrays: pip install -e '.[gpu]'"


def _cupy():
    return sys.modules.get("cupy")


def _import_cupy():
    try:
        import cupy
    except ImportError as e:
        raise ImportError(f"{_GPU_HINT} ({e})") from None
    return cupy


def is_available():
    """True when CuPy imports *and* a CUDA device is present."""
    try:
        import cupy
        return bool(cupy.cuda.is_available())
    except Exception:   # ImportError, or a CUDA runtime error on a machine without a driver
        return False


def array_types():
    """The array classes LeZero accepts: ndarray, plus cupy.ndarray once CuPy is loaded."""
    cp = _cupy()
    return (np.ndarray,) if cp is None else (np.ndarray, cp.ndarray)


def get_array_module(*args):
    """Return ``cupy`` if any argument (array or Variable) lives on the GPU, else ``numpy``."""
    cp = _cupy()
    if cp is None:
        return np
    for x in args:
        if not isinstance(x, (np.ndarray, cp.ndarray)):
            x = getattr(x, "data", x)      # a Variable: look at its array
        if isinstance(x, cp.ndarray):
            return cp
    return np


def as_array(x, like=None):
    """Turn Python data into an array: floats become float32, arrays pass through (the
    conversion ``Variable`` applies to what it is given).

    With ``like`` (an array), a Python scalar takes the dtype NumPy would give it next to
    ``like`` (a float next to float32 stays float32: no silent float64).
    """
    if isinstance(x, array_types()):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    if like is not None and isinstance(x, (bool, int, float)):
        xp = get_array_module(like)
        return xp.asarray(x, dtype=np.result_type(like.dtype, x))
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


def as_numpy(x):
    """A NumPy array from a NumPy/CuPy array, a Variable or a scalar."""
    if hasattr(x, "creator") and hasattr(x, "data"):      # a Variable
        x = x.data
    if isinstance(x, np.ndarray):
        return x
    cp = _cupy()
    if cp is not None and isinstance(x, cp.ndarray):
        return cp.asnumpy(x)
    return np.asarray(x)


def as_cupy(x, device=None):
    """A CuPy array (on ``device``, an int id, when given) from an array or a Variable."""
    cp = _import_cupy()
    if hasattr(x, "creator") and hasattr(x, "data"):
        x = x.data
    if device is None:
        return cp.asarray(x)
    with cp.cuda.Device(device):
        return cp.asarray(x)


def device_of(x):
    """``'cpu'`` or ``'cuda:N'`` for an array or a Variable."""
    cp = _cupy()
    if not isinstance(x, np.ndarray) and hasattr(x, "creator"):
        x = x.data
    if cp is not None and isinstance(x, cp.ndarray):
        return f"cuda:{x.device.id}"
    return "cpu"
