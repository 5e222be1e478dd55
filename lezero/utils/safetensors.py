"""The safetensors format, read and written with NumPy alone (no ``safetensors`` package).

A file is::

    8 bytes    N, the header length (unsigned little-endian)
    N bytes    a UTF-8 JSON object: {"name": {"dtype": "F32", "shape": [2, 3],
               "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}
    the rest   the tensors' raw little-endian C-order bytes; offsets are relative to here

The reader checks what a hostile file could abuse: the header length against the file size,
every tensor's byte count against its dtype and shape, and that the tensors tile the data
area exactly (no overlaps, no gaps), as the format requires.

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
    """Read an open binary file: returns ``(tensors, metadata)``, tensors in file order."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(0)
    head = f.read(8)
    if len(head) < 8:
        raise ValueError(f"{where}: file too short for a safetensors header ({size} bytes)")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER or n > size - 8:
        raise ValueError(f"{where}: header length {n} does not fit the file ({size} bytes)")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{where}: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{where}: the header must be a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError(f"{where}: __metadata__ must map strings to strings")
    data_start, data_size = 8 + n, size - 8 - n
    entries = sorted(header.items(), key=lambda kv: _offsets(kv, where)[0])
    expected = 0
    tensors = {}
    for name, info in entries:
        dtype_name, shape = info.get("dtype"), info.get("shape")
        begin, end = _offsets((name, info), where)
        if begin != expected:
            raise ValueError(f"{where}: tensor {name!r} starts at byte {begin}, expected "
                             f"{expected} (tensors must tile the data without gaps or overlap)")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"{where}: tensor {name!r} has an invalid shape {shape!r}")
        if dtype_name in _DTYPES:
            dtype, extra = _DTYPES[dtype_name], None
        elif dtype_name in _EXTRA_BY_ST:
            extra, dtype = _EXTRA_BY_ST[dtype_name]
        else:
            raise ValueError(f"{where}: tensor {name!r} has unsupported dtype {dtype_name!r}")
        count = math.prod(shape)          # Python ints: a hostile shape cannot overflow
        if end - begin != count * dtype.itemsize or end > data_size:
            raise ValueError(f"{where}: tensor {name!r} ({dtype_name} {shape}) does not match "
                             f"its byte range [{begin}, {end}) in {data_size} data bytes")
        array = np.empty(shape, dtype)
        f.seek(data_start + begin)
        if array.size and f.readinto(memoryview(array.reshape(-1).view(np.uint8))) != end - begin:
            raise ValueError(f"{where}: file truncated inside tensor {name!r}")
        if sys.byteorder == "big" and dtype.itemsize > 1:
            array = array.astype(dtype.newbyteorder("="))
        tensors[name] = from_bits(array, extra) if extra else array
        expected = end
    if expected != data_size:
        raise ValueError(f"{where}: {data_size - expected} trailing bytes after the last tensor")
    return tensors, dict(metadata)


def _offsets(item, where):
    name, info = item
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise ValueError(f"{where}: tensor {name!r} has invalid data_offsets {offsets!r}")
    return offsets


def load_file(path):
    """Read a safetensors file: a dict of name -> NumPy array (metadata is dropped; use
    ``load_file_with_metadata`` to get it)."""
    return load_file_with_metadata(path)[0]


def load_file_with_metadata(path):
    """Read a safetensors file: ``(tensors, metadata)``."""
    with open(path, "rb") as f:
        return read(f, where=os.fspath(path))
