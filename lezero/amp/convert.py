"""Fast float32 <-> float16 / bfloat16 conversion on NumPy (autocast converts a lot).

NumPy converts float32 to float16 one element at a time through a generic routine, about
11 ns an element here: for a ResNet-18 step that was most of autocast's cost on the CPU.
The Numba kernel below does the same round-to-nearest-even on the bit patterns, serially,
at about 3 ns an element; float16 -> float32 looks each value up in a table of all 65536
(made by ``astype``), bfloat16 -> float32 is a 16-bit shift.  ``ndarray.astype`` is
the reference (``tests/amp/test_convert.py`` checks bit-identity over normal, subnormal,
overflowing, tie, inf and NaN inputs).  CuPy arrays, small arrays and a disabled
``Config.use_numba`` take ``astype``.

Each result owns its memory (``base`` None), as ``astype``'s does, so the backward pass
may sum a gradient into it in place (``lezero.grad_sum``).
"""
import numpy as np

from lezero import kernels

__all__ = ["convert", "float32_to_float16", "float16_to_float32"]

_MIN_SIZE = 4096            # below this, astype's call overhead is already small
_kernels = None


def _compile():
    global _kernels
    if _kernels is None:
        from lezero.amp import _convert_kernels as k
        # float16 -> float32 through a table of all 65536 values (made by astype itself)
        table = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
        _kernels = (k.float32_bits_to_float16, k.lookup, table)
    return _kernels


def _fast(a):
    return isinstance(a, np.ndarray) and a.size >= _MIN_SIZE and kernels.enabled(a)


def _check_dtype(op, a, dtype):
    """TypeError unless ``a`` is an array of ``dtype``: the kernels read ``a``'s bytes as
    that dtype's bit patterns, one per element (a float16 array read as float32 bits has
    half as many words as the loop reads)."""
    if getattr(a, "dtype", None) != dtype:
        raise TypeError(f"{op}: a must be a {np.dtype(dtype).name} array, got "
                        f"{getattr(a, 'dtype', type(a).__name__)}")


def float32_to_float16(a):
    """``a.astype(np.float16)`` for a float32 NumPy array."""
    _check_dtype("float32_to_float16", a, np.float32)
    if not _fast(a):
        with np.errstate(over="ignore", invalid="ignore"):
            return a.astype(np.float16)
    src = np.ascontiguousarray(a).reshape(-1)
    out = np.empty(a.shape, np.float16)       # returned itself: it owns its memory
    _compile()[0](src, src.view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


def float16_to_float32(a):
    """``a.astype(np.float32)`` for a float16 NumPy array."""
    _check_dtype("float16_to_float32", a, np.float16)
    if not _fast(a):
        return a.astype(np.float32)
    bits = np.ascontiguousarray(a).reshape(-1).view(np.uint16)
    out = np.empty(a.shape, np.float32)
    _, up, table = _compile()
    up(bits, table, out.reshape(-1))
    return out


def convert(a, dtype):
    """``a.astype(dtype)``, by the fast paths where one applies."""
    dtype = np.dtype(dtype)
    src = a.dtype
    if src == dtype:
        return a.copy()
    if isinstance(a, np.ndarray):
        if src == np.float32 and dtype == np.float16:
            return float32_to_float16(a)
        if src == np.float16 and dtype == np.float32:
            return float16_to_float32(a)
        if src.name == "bfloat16" and dtype == np.float32:      # the top 16 bits
            out = np.empty(a.shape, np.float32)
            np.left_shift(a.view(np.uint16), 16, out=out.view(np.uint32),
                          dtype=np.uint32)
            return out
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(dtype)
