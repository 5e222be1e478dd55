"""The dtypes autocast can lower to: float16 (NumPy and CuPy) and bfloat16 (NumPy, through
the optional ``ml_dtypes`` package).

``resolve(where, name, dtype)`` turns what a user wrote ("float16", "fp16", "half",
``np.float16``, "bfloat16", "bf16", ``ml_dtypes.bfloat16``) into a NumPy dtype, or raises
a clear error: TypeError for something that is not a dtype at all, ValueError for a dtype
autocast cannot lower to (with the choices), ImportError naming ``pip install -e ".[amp]"``
when bfloat16 is asked for without ``ml_dtypes``.
"""
import numpy as np

from lezero.utils.checks import describe

__all__ = ["resolve", "is_low", "is_floating", "bfloat16"]

_ALIASES = {"float16": "float16", "fp16": "float16", "half": "float16",
            "bfloat16": "bfloat16", "bf16": "bfloat16"}
LOW_NAMES = frozenset(["float16", "bfloat16"])


def bfloat16(where="autocast"):
    """``ml_dtypes.bfloat16`` as a NumPy dtype (ImportError naming the extra without it)."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError(f"{where}: dtype 'bfloat16' needs the ml_dtypes package (NumPy has "
                          "no bfloat16): pip install -e '.[amp]'  (or: pip install ml_dtypes);"
                          " or use dtype='float16'") from None
    return np.dtype(ml_dtypes.bfloat16)


def resolve(where, name, dtype):
    """The NumPy dtype of a lower-precision float named by ``dtype``."""
    if isinstance(dtype, str):
        key = _ALIASES.get(dtype.strip().lower())
        if key is None:
            raise ValueError(f"{where}: {name} must be one of 'float16' ('fp16', 'half') or "
                             f"'bfloat16' ('bf16'), got {dtype!r}")
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"{where}: {name} must be a dtype or a dtype name such as "
                            f"'float16', got {describe(dtype)}") from None
        key = dt.name
        if key not in LOW_NAMES:
            raise ValueError(f"{where}: {name} must be a lower-precision float (float16 or "
                             f"bfloat16), got {dt.name}; float32 is what runs without "
                             "autocast")
    return np.dtype(np.float16) if key == "float16" else bfloat16(where)


def is_low(dtype):
    """True for float16 and bfloat16 (``dtype.name`` makes a string: asked last)."""
    return dtype.itemsize == 2 and (dtype.kind == "f" or dtype.name == "bfloat16")


def is_floating(dtype):
    """True for NumPy floats and ml_dtypes' bfloat16 (whose kind is not 'f')."""
    return dtype.kind == "f" or dtype.name == "bfloat16"
