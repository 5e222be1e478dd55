"""Every environment variable LeZero reads, in one table: name, what it does, who reads it.

``lezero.runtime.show()`` lists them with their current values.  The runtime reads its
own through ``getenv`` (which refuses a name missing from the table, so the table cannot
fall behind the code); the other packages read theirs where they are used, and
``tests/runtime/test_variables.py`` checks that every ``LEZERO_*`` name in the package is
listed here.  This module imports nothing but ``os``: it runs before NumPy loads.
"""
import os

__all__ = ["VARIABLES", "getenv", "listed"]

# (name, meaning, the module that reads it)
VARIABLES = (
    ("LEZERO_PROFILE", "'serial': no threads anywhere (read once, at import); "
     "'default' or unset: the measured thread policy", "lezero.runtime.settings"),
    ("NUMBA_NUM_THREADS", "the thread count of split kernels when conv_threads is 0 "
     "(also Numba's own pool)", "lezero.runtime.settings"),
    ("OMP_NUM_THREADS", "the thread count when NUMBA_NUM_THREADS is unset",
     "lezero.runtime.settings"),
    ("OPENBLAS_THREAD_TIMEOUT", "how long NumPy's OpenBLAS threads spin after a product "
     "(2^n cycles); LeZero sets 4 when unset", "lezero.runtime.openblas"),
    ("LEZERO_GEMM", "'numpy' runs every product on NumPy's BLAS; 'mkl': on Intel MKL where "
     "the mkl wheel is installed; 'auto' or unset: float ones on MKL only on an Intel CPU",
     "lezero.runtime.settings"),
    ("LEZERO_PARALLEL_BACKEND", "'local' or 'mpi': force the data-parallel backend",
     "lezero.parallel.world"),
    ("LEZERO_COLLECTIVE_TIMEOUT", "default timeout of a collective, seconds (600)",
     "lezero.parallel.world"),
    ("LEZERO_INIT_TIMEOUT", "how long MPI initialisation waits for the other ranks, "
     "seconds (600)", "lezero.parallel.world"),
    ("LEZERO_CHECK_COLLECTIVES", "'0' turns the ranks' agreement checks off",
     "lezero.parallel.agree"),
    ("LEZERO_MPI_CUDA_AWARE", "'1' or '0': whether MPI takes device buffers",
     "lezero.parallel._mpi"),
    ("LEZERO_JIT_CACHE", "folder of lz.jit's compiled graphs (~/.cache/lezero/jit)",
     "lezero.jit.passes.codegen"),
    ("LEZERO_CONV_CACHE", "the convolution autotuner's file",
     "lezero.functions.conv.autotune"),
    ("LEZERO_BACKEND", "the device of to_gpu()/to_device() in tests and examples: a "
     "registered backend's name (cupy by default; 'strict' for the device stand-in)",
     "lezero.backends.registry"),
    ("LEZERO_CACHE_DIR", "LeZero's cache folder (~/.cache/lezero)",
     "lezero.functions.conv.autotune, lezero.utils.cpp_extension"),
    ("LEZERO_EXTENSIONS_DIR", "where C++ extensions are built", "lezero.utils.cpp_extension"),
    ("LEZERO_DATA", "where datasets are downloaded (~/.cache/lezero/datasets)",
     "lezero.data.datasets.download"),
    ("LEZERO_CHECK_LOG", "folder where passing operator checks are logged (make test)",
     "lezero.testing.recording"),
)

_NAMES = frozenset(name for name, _, _ in VARIABLES)


def listed(name):
    """True when ``name`` is in the table."""
    return name in _NAMES


def getenv(name, default=None):
    """``os.environ.get(name, default)`` for a variable of the table (KeyError for one that
    is not: add it to ``VARIABLES`` first)."""
    if name not in _NAMES:
        raise KeyError(f"lezero.runtime.getenv: {name!r} is not in "
                       "lezero.runtime.variables.VARIABLES")
    return os.environ.get(name, default)
