"""The IDX file format of MNIST and Fashion-MNIST, plain or gzip'd.

An IDX file is: two zero bytes, a type code, the number of dimensions, each dimension as a
big-endian uint32, then the values in C order, big-endian.
"""
import gzip
import math
import os
import struct
import zlib

import numpy as np

from lezero.data.datasets.errors import IdxFileError
from lezero.utils.files import ReadBudget, atomic_write

__all__ = ["read_idx", "write_idx"]

_TYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
          0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_CODES = {dt.newbyteorder("="): code for code, dt in _TYPES.items()}


def _is_gzip(path):
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_idx(path, max_inflation=None):
    """Read an IDX file (gzip'd or not, told by its first bytes) into a native-endian
    array.  A malformed or truncated file raises ``IdxFileError`` (a ``ValueError``)
    naming it; the declared size is checked before it is read: against the file's size,
    or for a gzip'd file against ``max_inflation`` (default
    ``lezero.utils.files.MAX_INFLATION``) times it."""
    budget = ReadBudget(path, IdxFileError, max_inflation)    # a regular file (not a pipe)
    gzipped = _is_gzip(path)
    try:
        with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as f:
            return _read_body(f, path, gzipped, budget)
    except (OSError, EOFError, zlib.error) as e:      # a corrupt gzip stream
        if isinstance(e, IdxFileError):
            raise
        raise IdxFileError(f"read_idx: {path} cannot be read ({type(e).__name__}: "
                           f"{e})") from None


def _read_body(f, path, gzipped, budget):
    head = f.read(4)
    if len(head) != 4 or head[:2] != b"\x00\x00" or head[2] not in _TYPES:
        raise IdxFileError(f"read_idx: {path} is not an IDX file (header {head!r})")
    dtype, ndim = _TYPES[head[2]], head[3]
    dims = f.read(4 * ndim)
    if len(dims) != 4 * ndim:
        raise IdxFileError(f"read_idx: {path} ends inside its header")
    shape = struct.unpack(f">{ndim}I", dims)
    expected = math.prod(shape) * dtype.itemsize      # Python ints: no overflow
    if gzipped:
        budget.charge(expected, f"shape {shape} of {dtype}")
    elif 4 + 4 * ndim + expected != os.path.getsize(path):
        found = os.path.getsize(path) - 4 - 4 * ndim
        raise IdxFileError(f"read_idx: {path} should hold {expected} data bytes for shape "
                           f"{shape}, found {found}")
    body = f.read(expected + 1)
    if len(body) != expected:
        raise IdxFileError(f"read_idx: {path} should hold {expected} data bytes for shape "
                           f"{shape}, found {len(body) if len(body) <= expected else 'more'}")
    return np.frombuffer(body, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path, array):
    """Write ``array`` as an IDX file (gzip'd when ``path`` ends in .gz), atomically."""
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _CODES:
        raise TypeError(f"write_idx: dtype {array.dtype} has no IDX type code "
                        f"(use uint8, int8, int16, int32, float32 or float64)")
    code = _CODES[native]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    body = array.astype(_TYPES[code]).tobytes()
    payload = header + body
    if os.fspath(path).endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    return atomic_write(path, payload, where="write_idx")
