"""mpi4py, imported lazily, and what LeZero needs to know about the MPI underneath.

``import lezero.parallel`` never imports mpi4py: only ``init()`` (or the first
``get_world()``) does, and a missing mpi4py is an ImportError that names the extra to
install -- unless the process runs alone, where the one-process world needs no MPI.
"""
import ctypes
import os

_HINT = "pip install -e '.[mpi]'"

# Variables that MPI launchers (MPICH's hydra, Open MPI, Slurm, PMIx) set for each rank.
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
              "SLURM_NTASKS")


def launched_size():
    """The number of ranks a launcher says this job has (1 when started plainly)."""
    for name in _SIZE_VARS:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


def import_mpi():
    """``mpi4py.MPI``, or an ImportError that says how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"lezero.parallel needs mpi4py to run on several processes: "
                          f"{_HINT} (it installs mpi4py and MPICH). ({e})") from None
    return MPI


def have_mpi4py():
    """True when mpi4py can be imported (it is not imported for the answer)."""
    import importlib.util
    import sys
    if "mpi4py" in sys.modules:
        return sys.modules["mpi4py"] is not None
    try:
        return importlib.util.find_spec("mpi4py") is not None
    except (ImportError, ValueError):
        return False


def reduce_ops(MPI):
    """LeZero's op names -> MPI ops ("mean" is a sum divided afterwards)."""
    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
            "prod": MPI.PROD}


def cuda_aware(MPI):
    """Whether this MPI reads and writes GPU memory itself (CUDA-aware).

    ``LEZERO_MPI_CUDA_AWARE=1`` or ``0`` decides; otherwise the MPI library is asked
    through its extension (Open MPI's ``MPIX_Query_cuda_support``, MPICH's
    ``MPIX_GPU_query_support``).  When in doubt the answer is False: staging through host
    memory is always correct, only slower.
    """
    forced = os.environ.get("LEZERO_MPI_CUDA_AWARE")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        lib = ctypes.CDLL(None)
    except OSError:
        return False
    query = getattr(lib, "MPIX_Query_cuda_support", None)
    if query is not None:
        return bool(query())
    query = getattr(lib, "MPIX_GPU_query_support", None)
    if query is not None:
        flag = ctypes.c_int(0)
        cuda = 1     # MPIX_GPU_SUPPORT_CUDA
        if query(ctypes.c_int(cuda), ctypes.byref(flag)) == 0:
            return bool(flag.value)
    return False
