"""How an array travels through MPI: a contiguous buffer of a type MPI knows, in host or
GPU memory.

* NumPy arrays go through mpi4py's buffer (uppercase) API as they are -- never pickled.
* CuPy arrays go to MPI directly when the MPI is CUDA-aware (after the current stream is
  synchronised, so the data is there); otherwise they are staged: copied to host memory,
  communicated, copied back.  Nothing here names a device: the array's backend
  (``lezero.backends``) gives the namespace, ``synchronize`` and the host copies.
* MPI has no type for bfloat16 or the float8s (ml_dtypes): reductions run on a float32
  copy; copies (broadcast, gather, send) move the raw bits as unsigned integers.  Booleans
  travel as uint8.
"""
import numpy as np

from lezero.backends import get_backend, of_namespace

# dtype.char of the types MPI reduces natively (MPICH and Open MPI both have float16).
_NATIVE = set("efdFDbhilqBHILQ")


def plan(dtype, reducing):
    """``(wire_dtype, bits)``: the dtype that goes on the wire, and whether it is a raw
    reinterpretation of the bits (True) or a value conversion (False)."""
    dtype = np.dtype(dtype)
    if dtype.char in _NATIVE:
        return dtype, False
    if dtype == np.bool_:
        return np.dtype(np.uint8), False
    if reducing:
        return np.dtype(np.float32), False
    return np.dtype(f"u{dtype.itemsize}"), True


def to_wire(arr, wire_dtype, bits, cuda_aware):
    """A contiguous buffer MPI can read, holding ``arr``'s values as ``wire_dtype``."""
    backend = get_backend(arr)
    xp = np if backend.is_host else backend.xp
    if wire_dtype != arr.dtype:
        arr = xp.ascontiguousarray(arr).view(wire_dtype) if bits else arr.astype(wire_dtype)
    arr = xp.ascontiguousarray(arr)
    if backend.is_host:
        return arr
    if cuda_aware:
        backend.synchronize()       # MPI reads the memory behind the device queue's back
        return arr
    return backend.to_host(arr)


def empty_wire(shape, wire_dtype, xp, cuda_aware):
    """An uninitialised receive buffer: on the device for CUDA-aware MPI, else on the host."""
    if cuda_aware and not of_namespace(xp).is_host:
        return xp.empty(shape, wire_dtype)
    return np.empty(shape, wire_dtype)


def from_wire(buf, dtype, bits, xp, out=None):
    """The received ``buf`` as an array of ``dtype`` on ``xp``'s device (into ``out``)."""
    buf = of_namespace(xp).asarray(buf)
    if buf.dtype != dtype:
        buf = buf.view(dtype) if bits else buf.astype(dtype)
    if out is None:
        return buf
    if out.shape != buf.shape:
        buf = buf.reshape(out.shape)
    if buf is not out:
        out[...] = buf
    return out


def nbytes_text(n):
    """2.0 KiB, 25.0 MiB ..."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
