"""NumPy's own OpenBLAS, reached by symbol: how long its threads spin, and its ``sgemm``.

**The spin.**  After each threaded product OpenBLAS's worker threads spin for 2^28 cycles
(about 0.1 s) before they sleep, unless ``OPENBLAS_THREAD_TIMEOUT`` says otherwise.
Whatever runs next -- LeZero's own parts, the LSTM's chunks, another process -- then finds
a core taken; numbers in docs/performance.md (issue 33).  ``settle_threads()`` makes
them sleep after 2^4 cycles: it sets the variable when the user has not, and when NumPy
has already loaded (its OpenBLAS read the environment then) it makes OpenBLAS read it
again and ends its threads, which the next product restarts with the short timeout.  It
runs once, when ``lezero`` is imported.

**sgemm.**  Kernels that call a product from inside Numba code (the LSTM chunks, the
attention heads) cannot call ``numpy.matmul`` there, and Numba's ``np.dot`` goes to
SciPy's BLAS, slower on these shapes.  ``sgemm()`` finds ``cblas_sgemm`` in the OpenBLAS
NumPy loaded and returns it as a ctypes function, which a kernel takes as an argument (a
pointer passed at run time, so the kernel still caches to disk) and calls like C::

    gemm(ROW_MAJOR, NO_TRANS, TRANS, m, n, k, 1.0, a_ptr, lda, b_ptr, ldb, 0.0, c_ptr, ldc)

Where NumPy's BLAS is not an OpenBLAS whose symbols can be found, ``sgemm()`` is None
and the callers keep their NumPy path.
"""
import ctypes
import os
import sys

from lezero.runtime.variables import getenv

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112      # the CBLAS enum values
TIMEOUT = "4"           # 2^4 cycles of spinning, then sleep (OpenBLAS's floor)

# (symbol, integer type): NumPy's wheels ship OpenBLAS with 64-bit integers and prefixed,
# suffixed names (scipy-openblas); plain builds export cblas_sgemm with C ints.
_SYMBOLS = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
            ("scipy_cblas_sgemm", ctypes.c_int), ("cblas_sgemm", ctypes.c_int))

_found = []
_settled = {}


def settle_threads():
    """Have NumPy's OpenBLAS threads sleep soon after each product (see above); returns
    where the timeout came from: ``"env: OPENBLAS_THREAD_TIMEOUT"`` (the user's),
    ``"default"`` (set by LeZero) or ``"default (not applied: ...)"``."""
    if not _settled:
        _settled["source"] = _settle()
    return _settled["source"]


def _settle():
    if getenv("OPENBLAS_THREAD_TIMEOUT") is not None:
        return "env: OPENBLAS_THREAD_TIMEOUT"
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = TIMEOUT
    if "numpy" not in sys.modules:
        return "default"                # OpenBLAS reads it when NumPy loads it
    libs = [lib for lib in _numpy_openblas()
            if hasattr(lib, "openblas_read_env") and hasattr(lib, "blas_thread_shutdown_")]
    for lib in libs:
        lib.openblas_read_env()         # reads the timeout again ...
        lib.blas_thread_shutdown_()     # ... which threads read when they start
    return "default" if libs else "default (not applied: NumPy's BLAS was already loaded)"


def sgemm():
    """NumPy's ``cblas_sgemm`` as a ctypes function, or None where it cannot be found."""
    if not _found:
        _found.append(_locate())
    return _found[0]


def _numpy_openblas():
    """ctypes handles of the OpenBLAS libraries loaded from NumPy's own directories."""
    import numpy as np
    try:
        import threadpoolctl
        libs = threadpoolctl.ThreadpoolController().select(internal_api="openblas")
    except Exception:           # not installed, or it cannot inspect this process
        return []
    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    own = (os.path.join(site, "numpy"), os.path.join(site, "numpy.libs"))
    handles = []
    for c in libs.lib_controllers:
        if os.path.abspath(c.filepath).startswith(own):
            try:
                handles.append(ctypes.CDLL(c.filepath))     # loaded: this only gets a handle
            except OSError:
                pass
    return handles


def _locate():
    for lib in _numpy_openblas():
        for name, integer in _SYMBOLS:
            fn = getattr(lib, name, None)
            if fn is None:
                continue
            fn.restype = None
            ptr, f32 = ctypes.c_void_p, ctypes.c_float
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, integer, integer, integer,
                           f32, ptr, integer, ptr, integer, f32, ptr, integer]
            return fn
    return None
