"""NumPy's own BLAS ``sgemm``, callable from inside Numba kernels.

A kernel that runs its own threads (``prange``) and needs a matrix product in each of
them -- the parallel LSTM step of ``lezero.kernels.lstm`` -- cannot call ``numpy.matmul``
there, and Numba's ``np.dot`` goes to SciPy's BLAS, which took 143 us for a product that
NumPy's OpenBLAS does in 86 (20x256 @ 256x512, one thread, 2026-12-05).  ``sgemm()``
finds ``cblas_sgemm`` in the OpenBLAS that NumPy itself loaded and returns it as a ctypes
function; a kernel takes it as an argument (a function pointer passed at run time, so the
kernel still caches to disk) and calls it like C::

    gemm(ROW_MAJOR, NO_TRANS, TRANS, m, n, k, 1.0, a_ptr, lda, b_ptr, ldb, 0.0, c_ptr, ldc)

with pointers from ``array.ctypes.data``.  Where NumPy's BLAS is not an OpenBLAS whose
symbols can be found (another BLAS, no threadpoolctl), ``sgemm()`` is None and the
callers keep their NumPy path.  The caller holds BLAS to one thread while its own
threads call in (``threadpoolctl``), or each call would start BLAS threads of its own.
"""
import ctypes
import os

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112      # the CBLAS enum values

# (symbol, integer type): NumPy's wheels ship OpenBLAS with 64-bit integers and prefixed,
# suffixed names (scipy-openblas); plain builds export cblas_sgemm with C ints.
_SYMBOLS = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
            ("scipy_cblas_sgemm", ctypes.c_int), ("cblas_sgemm", ctypes.c_int))

_found = []


def sgemm():
    """NumPy's ``cblas_sgemm`` as a ctypes function, or None where it cannot be found."""
    if not _found:
        _found.append(_locate())
    return _found[0]


def _numpy_openblas_paths():
    """Paths of the OpenBLAS libraries loaded from NumPy's own directories."""
    import numpy as np
    try:
        import threadpoolctl
        libs = threadpoolctl.ThreadpoolController().select(internal_api="openblas")
    except Exception:           # not installed, or it cannot inspect this process
        return []
    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    own = (os.path.join(site, "numpy"), os.path.join(site, "numpy.libs"))
    return [c.filepath for c in libs.lib_controllers
            if os.path.abspath(c.filepath).startswith(own)]


def _locate():
    for path in _numpy_openblas_paths():
        try:
            lib = ctypes.CDLL(path)         # already loaded: this only gets its handle
        except OSError:
            continue
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
