"""The safetensors format, read and written with NumPy alone (no ``safetensors`` package).

A file is::

    8 bytes    N, the header length (unsigned little-endian)
    N bytes    a UTF-8 JSON object: {"name": {"dtype": "F32", "shape": [2, 3],
               "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}
    the rest   the tensors' raw little-endian C-order bytes; offsets are relative to here

The reader checks what a hostile file could abuse: the header length against the file size,
every tensor's byte count against its dtype and shape, and that the tensors tile the data
area exactly (no overlaps, no gaps), as the format requires.  Whatever is wrong raises
``SafetensorsError`` (a ``ValueError``) naming the file.

This module also owns the dtypes NumPy lacks: bfloat16 and the two float8 formats.  With
the ``ml_dtypes`` package installed they load as its dtypes; without it they load as
float32 (every such value is exactly representable in float32).
"""
import json
import math
import os
import struct
import sys

import numpy as np

from lezero.utils.files import FileFormatError, check_regular_file


class SafetensorsError(FileFormatError):
    """A safetensors file is malformed; the message names the file and what is wrong."""


# safetensors dtype name -> NumPy dtype (little-endian)
_DTYPES = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "F16": np.dtype("<f2"),
    "U32": np.dtype("<u4"), "I32": np.dtype("<i4"), "F32": np.dtype("<f4"),
    "U64": np.dtype("<u8"), "I64": np.dtype("<i8"), "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"), "C128": np.dtype("<c16"),
}
_NAMES = {dt.newbyteorder("="): name for name, dt in _DTYPES.items()}

# Dtypes stored as raw bits: name -> (safetensors name, unsigned container dtype)
EXTRA_DTYPES = {
    "bfloat16": ("BF16", np.dtype("<u2")),
    "float8_e4m3fn": ("F8_E4M3", np.dtype("u1")),
    "float8_e5m2": ("F8_E5M2", np.dtype("u1")),
}
_EXTRA_BY_ST = {st: (name, bits) for name, (st, bits) in EXTRA_DTYPES.items()}

MAX_HEADER = 100 * 1024 * 1024     # the reference implementation's limit too
MAX_NDIM = 32                      # NumPy's own limit is 64


def numeric_dtype(dtype, also=""):
    """True for the dtypes a loader may build: bool, integers, floats, complex (one plain
    number per element: no fields, subarrays or objects), bfloat16/float8, and the kinds
    in ``also`` (``"SU"``: fixed-width bytes and text)."""
    dtype = np.dtype(dtype)
    if dtype.fields is not None or dtype.subdtype is not None or dtype.hasobject:
        return False
    return dtype.kind in "biufc" + also or extra_dtype_name(dtype) is not None


def check_shape(shape, where, what, error=None):
    """``shape`` (a list/tuple of ints) as a tuple, or ``error`` (``SafetensorsError``)
    naming ``what``: dims must be non-negative ints (not bools), at most ``MAX_NDIM`` of
    them, with a product NumPy can index."""
    if (not isinstance(shape, (list, tuple)) or len(shape) > MAX_NDIM
            or not all(type(d) is int and d >= 0 for d in shape)
            or math.prod(shape) >= 2 ** 62 or any(d >= 2 ** 62 for d in shape)):
        raise (error or SafetensorsError)(f"{where}: {what} has an invalid shape {shape!r}")
    return tuple(shape)


# ----- dtypes NumPy does not have -------------------------------------------------------
def extra_dtype_name(dtype):
    """``'bfloat16'`` etc. for an ``ml_dtypes`` dtype, else None."""
    name = np.dtype(dtype).name
    return name if name in EXTRA_DTYPES else None


def to_bits(array):
    """The raw unsigned-integer view of a bfloat16/float8 array (for formats without them)."""
    _, bits = EXTRA_DTYPES[array.dtype.name]
    return array.astype(array.dtype, order="C", copy=False).view(bits.newbyteorder("="))


def from_bits(bits, name):
    """Turn stored bits back into numbers: an ``ml_dtypes`` array when that package is
    installed, otherwise float32 holding the same values."""
    try:
        import ml_dtypes
        return bits.view(getattr(ml_dtypes, name))
    except ImportError:
        pass
    if name == "bfloat16":     # bfloat16 is the top half of a float32
        wide = bits.astype(np.uint32)
        wide <<= 16            # in place: keeps 0-d arrays arrays
        return wide.view(np.float32)
    return _float8_table(name)[bits.reshape(-1)].reshape(bits.shape)


def _float8_table(name):
    """float32 values of all 256 codes of an 8-bit float format."""
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if name == "float8_e4m3fn":        # 4 exponent bits (bias 7), 3 mantissa, no infinity
        exp, man, bias, mbits = (codes >> 3) & 0xF, codes & 0x7, 7, 3
        special = (exp == 0xF) & (man == 0x7)
        nan_or_inf = np.full(256, np.nan)
    else:                              # e5m2: IEEE-like, 5 exponent bits (bias 15)
        exp, man, bias, mbits = (codes >> 2) & 0x1F, codes & 0x3, 15, 2
        special = exp == 0x1F
        nan_or_inf = np.where(man == 0, np.inf, np.nan)
    normal = (1 + man / 2.0 ** mbits) * 2.0 ** (exp - bias)
    subnormal = (man / 2.0 ** mbits) * 2.0 ** (1 - bias)
    values = sign * np.where(exp == 0, subnormal, normal)
    values = np.where(special, sign * nan_or_inf, values)
    return values.astype(np.float32)


# ----- writing ------------------------------------------------------------------------------
def _entry(name, array):
    """(dtype name, little-endian contiguous array to write) for one tensor."""
    extra = extra_dtype_name(array.dtype)
    if extra:
        return EXTRA_DTYPES[extra][0], to_bits(array).astype(EXTRA_DTYPES[extra][1])
    key = array.dtype.newbyteorder("=")
    if key not in _NAMES:
        raise TypeError(f"safetensors: tensor {name!r} has dtype {array.dtype}, which the "
                        f"format cannot store (supported: {', '.join(_DTYPES)}, BF16, F8)")
    st = _NAMES[key]
    # astype, not ascontiguousarray: the latter turns 0-d arrays into 1-d ones
    return st, array.astype(_DTYPES[st], order="C", copy=False)


def write(f, tensors, metadata=None):
    """Write ``tensors`` (a dict of name -> NumPy array) and ``metadata`` (str -> str) to
    the open binary file ``f``."""
    header, chunks, offset = {}, [], 0
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"safetensors: __metadata__ must map str to str, got "
                                f"{k!r}: {type(v).__name__}")
        header["__metadata__"] = dict(metadata)
    for name, array in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"safetensors: invalid tensor name {name!r}")
        st, data = _entry(name, np.asarray(array))
        header[name] = {"dtype": st, "shape": list(data.shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
        chunks.append(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)         # pad so that the data starts 8-byte aligned
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for data in chunks:
        _write_array(f, data)


def _write_array(f, data):
    if data.size:
        f.write(memoryview(data.reshape(-1).view(np.uint8)))


def save_file(tensors, path, metadata=None):
    """Write a safetensors file atomically (temporary file, fsync, rename)."""
    from lezero.utils.files import atomic_write
    atomic_write(path, lambda f: write(f, tensors, metadata), where="safetensors.save_file")


# ----- reading ------------------------------------------------------------------------------
def read(f, where="safetensors"):
    """Read an open binary file: returns ``(tensors, metadata)``, tensors in file order.
    Raises ``SafetensorsError`` naming ``where`` for anything malformed."""
    header, data_start, data_size = _read_header(f, where)
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{where}: __metadata__ must map strings to strings")
    entries = sorted(header.items(), key=lambda kv: _offsets(kv, where)[0])
    expected = 0
    tensors = {}
    for name, info in entries:
        begin, end = _offsets((name, info), where)
        if begin != expected:
            raise SafetensorsError(f"{where}: tensor {name!r} starts at byte {begin}, expected "
                                   f"{expected} (tensors must tile the data without gaps or "
                                   "overlap)")
        shape = check_shape(info.get("shape"), where, f"tensor {name!r}")
        dtype_name = info.get("dtype")
        if isinstance(dtype_name, str) and dtype_name in _DTYPES:
            dtype, extra = _DTYPES[dtype_name], None
        elif isinstance(dtype_name, str) and dtype_name in _EXTRA_BY_ST:
            extra, dtype = _EXTRA_BY_ST[dtype_name]
        else:
            raise SafetensorsError(f"{where}: tensor {name!r} has unsupported dtype "
                                   f"{dtype_name!r}")
        count = math.prod(shape)          # Python ints: a hostile shape cannot overflow
        if end - begin != count * dtype.itemsize or end > data_size:
            raise SafetensorsError(f"{where}: tensor {name!r} ({dtype_name} {list(shape)}) does "
                                   f"not match its byte range [{begin}, {end}) in {data_size} "
                                   "data bytes")
        tensors[name] = _read_tensor(f, data_start + begin, shape, dtype, extra, where, name)
        expected = end
    if expected != data_size:
        raise SafetensorsError(f"{where}: {data_size - expected} trailing bytes after the last "
                               "tensor")
    return tensors, dict(metadata)


def _read_header(f, where):
    """The parsed JSON header (a dict), where the data starts and how many bytes it has."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(0)
    head = f.read(8)
    if len(head) < 8:
        raise SafetensorsError(f"{where}: file too short for a safetensors header ({size} "
                               "bytes)")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER or n > size - 8:
        raise SafetensorsError(f"{where}: header length {n} does not fit the file ({size} "
                               f"bytes; at most {MAX_HEADER})")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (ValueError, RecursionError) as e:      # bad UTF-8 / JSON, huge ints, deep nesting
        raise SafetensorsError(f"{where}: the header is not valid JSON "
                               f"({type(e).__name__}: {e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{where}: the header must be a JSON object")
    return header, 8 + n, size - 8 - n


def _read_tensor(f, offset, shape, dtype, extra, where, name):
    array = np.empty(shape, dtype)
    f.seek(offset)
    if array.size and f.readinto(memoryview(array.reshape(-1).view(np.uint8))) != array.nbytes:
        raise SafetensorsError(f"{where}: file truncated inside tensor {name!r}")
    if sys.byteorder == "big" and dtype.itemsize > 1:
        array = array.astype(dtype.newbyteorder("="))
    return from_bits(array, extra) if extra else array


def _offsets(item, where):
    name, info = item
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise SafetensorsError(f"{where}: tensor {name!r} has invalid data_offsets {offsets!r}")
    return offsets


def load_file(path):
    """Read a safetensors file: a dict of name -> NumPy array (metadata is dropped; use
    ``load_file_with_metadata`` to get it)."""
    return load_file_with_metadata(path)[0]


def load_file_with_metadata(path):
    """Read a safetensors file: ``(tensors, metadata)``."""
    check_regular_file(path, SafetensorsError)
    with open(path, "rb") as f:
        return read(f, where=os.fspath(path))
