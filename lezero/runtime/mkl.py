"""Intel MKL's matrix products, reached by ctypes where the ``mkl`` wheel is installed.

Why: on x86 CPUs MKL's ``sgemm`` runs the products of transformers and convolutions
8-20% faster than the OpenBLAS NumPy ships, and its ``cblas_gemm_s8u8s32`` multiplies
uint8 by int8 exactly on AMX or VNNI units, several times float32's rate (figures:
docs/performance.md, "MKL").  PyTorch's CPU wheels link the same library.

How: ``library()`` loads ``libmkl_rt`` once and switches it to MKL's *sequential*
threading layer before anything else, so MKL starts no OpenMP pool of its own (whose
threads would spin on a busy machine); ``lezero.runtime.blas`` splits a large product
over LeZero's worker threads, one sequential MKL call per part, as every other split
kernel.  The functions here run one call on the calling thread.

Every wrapper checks what the native code relies on -- dtypes, 2-D shapes that agree,
a unit stride on one axis of each operand, leading dimensions, an output of the right
shape -- and raises ``ValueError`` naming the argument, since MKL reads and writes
through raw pointers.  By default (``policy.gemm = "auto"``) products use MKL only on an
Intel CPU (``used()``); ``lz.runtime.policy.gemm = "numpy"`` (or ``LEZERO_GEMM=numpy``)
turns MKL off, ``"mkl"`` puts every product on it; without the wheel NumPy runs
everything.
"""
import ctypes
import ctypes.util
import glob
import os
import sys

import numpy as np

__all__ = ["library", "used", "intel_cpu", "gemm", "checked_gemm", "gemm_u8s8s32",
           "operand"]

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112      # CBLAS enum values
_FIX_OFFSET = 173                               # CblasFixOffset: one offset for all of C
_SEQUENTIAL = 1                                 # MKL_THREADING_SEQUENTIAL
_found = {}


def _candidates():
    """Paths where the ``mkl`` wheel (or a system MKL) puts ``libmkl_rt``."""
    paths = []
    try:
        from importlib import metadata
        paths += [str(f.locate()) for f in (metadata.files("mkl") or ())
                  if "libmkl_rt.so" in f.name]
    except Exception:           # not installed as a distribution
        pass
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        paths += sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")), reverse=True)
    found = ctypes.util.find_library("mkl_rt")
    return paths + ([found] if found else [])


def library():
    """The loaded ``libmkl_rt`` (sequential layer), or None where none can be loaded."""
    if "lib" not in _found:
        _found["lib"] = _load()
    return _found["lib"]


def _load():
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        try:
            lib.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
            lib.MKL_Set_Threading_Layer.restype = ctypes.c_int
            if lib.MKL_Set_Threading_Layer(_SEQUENTIAL) != _SEQUENTIAL:
                continue        # MKL was already in use with another layer
            _declare(lib)
        except AttributeError:  # not a usable MKL
            continue
        return lib
    return None


def _declare(lib):
    """Give the used entry points their C signatures (LP64: C ints)."""
    i, p = ctypes.c_int, ctypes.c_void_p
    for name, real in (("cblas_sgemm", ctypes.c_float), ("cblas_dgemm", ctypes.c_double)):
        fn = getattr(lib, name)
        fn.restype = None
        fn.argtypes = [i, i, i, i, i, i, real, p, i, p, i, real, p, i]
    fn = lib.cblas_gemm_s8u8s32
    fn.restype = None
    fn.argtypes = [i, i, i, i, i, i, i, ctypes.c_float, p, i, ctypes.c_int8, p, i,
                   ctypes.c_int8, ctypes.c_float, p, i, p]


def used():
    """True when LeZero's products, float and int8, run on MKL: ``policy.gemm == "mkl"``,
    or ``"auto"`` on an Intel CPU.  MKL picks its fast code by Intel's CPU models; on an
    AMD EPYC (Zen 3) its sgemm took 0.9-4.3x OpenBLAS's time on LeZero's product shapes,
    whole models ran 2-17% slower on it, and its ``cblas_gemm_s8u8s32`` took 2.5-8x the
    time of LeZero's own int8 kernel (docs/performance.md, "MKL on other CPUs")."""
    from lezero.runtime.settings import policy
    mode = policy.gemm
    return (mode == "mkl" or mode == "auto" and intel_cpu()) and library() is not None


def intel_cpu():
    """True when the CPU's vendor is Intel (Linux's /proc/cpuinfo; elsewhere the
    platform's processor string)."""
    if "intel" not in _found:
        _found["intel"] = _vendor() == "GenuineIntel"
    return _found["intel"]


def _vendor():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return "GenuineIntel" if "intel" in platform.processor().lower() else ""


_LIMIT = 2 ** 31 - 1        # LP64: every size and leading dimension is a C int


def operand(x, name):
    """``(trans, ld)`` of a 2-D array as a row-major CBLAS operand: rows with a unit
    stride (NO_TRANS, ld = row stride) or columns with one (TRANS, ld = column stride);
    None when neither axis has a unit stride or a stride is not a whole item count."""
    if x.ndim != 2:
        raise ValueError(f"mkl.gemm: {name} must be 2-D, got shape {x.shape}")
    item = x.itemsize
    s0, s1 = x.strides
    rows, cols = x.shape
    if x.size == 0:             # nothing is read: any leading dimension will do
        return NO_TRANS, max(cols, 1)
    if (s1 == item or cols == 1) and s0 % item == 0 and s0 // item >= max(cols, 1):
        return NO_TRANS, s0 // item
    if (s0 == item or rows == 1) and s1 % item == 0 and s1 // item >= max(rows, 1):
        return TRANS, s1 // item
    return None


def _check_out(out, m, n, dtype):
    ok = isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == (m, n) \
        and out.flags.writeable
    if ok and out.size == 0:
        return max(n, 1)
    if not (ok and out.strides[1] == out.itemsize and out.strides[0] >= n * out.itemsize
            and out.strides[0] % out.itemsize == 0):
        raise ValueError(f"mkl.gemm: out must be a writeable ({m}, {n}) {np.dtype(dtype)} "
                         f"array with unit column stride, got "
                         f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', type(out))}")
    return out.strides[0] // out.itemsize


def gemm(a, b, out, accumulate=False):
    """``out = a @ b`` (``out += a @ b`` when ``accumulate``) for float32 or float64 2-D
    arrays, one sequential MKL call on this thread; returns ``out``."""
    lib = library()
    if lib is None:
        raise RuntimeError("mkl.gemm: MKL is not available (pip install mkl)")
    if a.dtype != b.dtype or a.dtype not in (np.float32, np.float64):
        raise ValueError(f"mkl.gemm: a and b must both be float32 or float64, got "
                         f"{a.dtype} and {b.dtype}")
    ta, tb = operand(a, "a"), operand(b, "b")
    if ta is None or tb is None:
        raise ValueError(f"mkl.gemm: an operand has no unit stride (strides {a.strides}, "
                         f"{b.strides}); pass a contiguous or transposed-contiguous array")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"mkl.gemm: inner dimensions differ: {a.shape} @ {b.shape}")
    ldc = _check_out(out, m, n, a.dtype)
    if max(m, n, k, ta[1], tb[1], ldc) > _LIMIT:
        raise ValueError(f"mkl.gemm: a size exceeds MKL's 32-bit integers: {a.shape} @ {b.shape}")
    return checked_gemm(a, ta, b, tb, out, ldc, accumulate)


def address(a):
    """The byte address of ``a``'s first element."""
    return a.__array_interface__["data"][0]


def gemm_at(dtype, ta, tb, m, n, k, pa, pb, pc, ldc):
    """``c = a @ b`` for matrices given by byte address (``pa``, ``pb``, ``pc``), for a
    caller that checked them as ``checked_gemm`` asks (``lezero.runtime.gemm``'s stacks:
    each matrix a view NumPy vouches for, the layout checked once per stack)."""
    lib = _found["lib"]
    fn = lib.cblas_sgemm if dtype == np.float32 else lib.cblas_dgemm
    fn(ROW_MAJOR, ta[0], tb[0], m, n, k, 1.0, pa, ta[1], pb, tb[1], 0.0, pc, ldc)


def checked_gemm(a, ta, b, tb, out, ldc, accumulate=False):
    """``gemm`` after its checks, for a caller that made them itself: ``ta``/``tb`` from
    ``operand``, ``out`` a new C-contiguous array of the product's shape and dtype
    (``ldc`` its row length), one float dtype throughout and ``a.shape[1] ==
    b.shape[0]`` (``lezero.runtime.gemm`` on a small product: the checks are most of its
    cost)."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return out
    if k == 0:
        if not accumulate:
            out[...] = 0
        return out
    lib = _found["lib"]
    fn = lib.cblas_sgemm if a.dtype == np.float32 else lib.cblas_dgemm
    fn(ROW_MAJOR, ta[0], tb[0], m, n, k, 1.0, address(a), ta[1], address(b), tb[1],
       1.0 if accumulate else 0.0, address(out), ldc)
    return out


_ZERO = np.zeros(1, np.int32)


def gemm_u8s8s32(a, w, out):
    """``out = a @ w.T`` exactly in int32, for ``a`` uint8 (m, k) and ``w`` int8 (n, k),
    both with unit row stride; ``out`` int32 (m, n).  One sequential MKL call (AMX or VNNI
    where the CPU has them); returns ``out``."""
    lib = library()
    if lib is None:
        raise RuntimeError("mkl.gemm_u8s8s32: MKL is not available (pip install mkl)")
    if a.dtype != np.uint8 or w.dtype != np.int8:
        raise ValueError(f"mkl.gemm_u8s8s32: a must be uint8 and w int8, got {a.dtype} "
                         f"and {w.dtype}")
    ta, tw = operand(a, "a"), operand(w, "w")
    if ta is None or tw is None or ta[0] != NO_TRANS or tw[0] != NO_TRANS:
        raise ValueError("mkl.gemm_u8s8s32: a and w need a unit stride along k (rows)")
    (m, k), (n, k2) = a.shape, w.shape
    if k != k2:
        raise ValueError(f"mkl.gemm_u8s8s32: a {a.shape} and w {w.shape} differ in k")
    if out.dtype != np.int32:
        raise ValueError(f"mkl.gemm_u8s8s32: out must be int32, got {out.dtype}")
    ldc = _check_out(out, m, n, np.int32)
    if max(m, n, k, ta[1], tw[1], ldc) > _LIMIT:
        raise ValueError("mkl.gemm_u8s8s32: a size exceeds MKL's 32-bit integers")
    if m == 0 or n == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    lib.cblas_gemm_s8u8s32(ROW_MAJOR, NO_TRANS, TRANS, _FIX_OFFSET, m, n, k, 1.0,
                           address(a), ta[1], 0, address(w), tw[1], 0, 0.0,
                           address(out), ldc, address(_ZERO))
    return out
