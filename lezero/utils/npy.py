"""Reading ``.npy`` files and ``.npz`` archives that may come from strangers: the one reader
behind ``lz.load`` (``.npz``) and ``NpyDataset`` / ``NpzDataset`` / the SpokenDigits cache.

``np.load`` trusts a file: it reads a header length of up to 4 GB before checking it, and
allocates the array a header declares before reading a byte of it, so a 100-byte file can
ask for terabytes.  Here the header is read with bounded reads (at most
``MAX_HEADER_BYTES``) and parsed as a literal (never evaluated), only plain dtypes are
accepted (numbers, bool, fixed-width bytes/text: no Python objects, fields or sub-arrays),
every declared size is checked against the bytes actually there *before* anything is
mapped or allocated, and ``.npz`` members are inflated within a ``ReadBudget``.  Problems
raise ``NpyFormatError`` (a ``.npy`` file) or ``NpzFormatError`` (an ``.npz`` archive or
one of its members) naming the file; ``NpzKeyError`` (also a ``KeyError``) for a key the
archive lacks.
"""
import ast
import math
import os
import re
import struct
import zipfile

import numpy as np
from numpy.lib.format import descr_to_dtype

from lezero.utils.files import (ZIP_ERRORS, FileFormatError, MissingKeyError, ReadBudget,
                                check_regular_file, read_zip_member)
from lezero.utils.safetensors import check_shape, numeric_dtype

__all__ = ["NpyFormatError", "NpzFormatError", "NpzKeyError", "MAX_HEADER_BYTES",
           "parse_npy_header", "npy_from_bytes", "open_npy", "read_npz"]

MAX_HEADER_BYTES = 10000        # NumPy's own limit; a real array's header is under 1 KB
_MAGIC = b"\x93NUMPY"
_LENGTH_FIELD = {1: "<H", 2: "<I"}       # format version -> header length field
_PY2_LONG = re.compile(r"(?<=\d)L\b")    # "(3L, 4L)" in headers Python 2 wrote


class NpyFormatError(FileFormatError):
    """A ``.npy`` file is malformed, truncated or holds what LeZero does not load."""


class NpzFormatError(FileFormatError):
    """An ``.npz`` archive or one of its members is malformed, too large or unsafe."""


class NpzKeyError(NpzFormatError, MissingKeyError):
    """An ``.npz`` archive lacks the array the caller named."""


def _literal_header(raw, version):
    """The header dict's text parsed as a Python literal (Python 2's ``3L`` accepted)."""
    text = raw.decode("latin1")
    try:
        return ast.literal_eval(text)
    except SyntaxError:
        if version != 1 or not _PY2_LONG.search(text):
            raise
        return ast.literal_eval(_PY2_LONG.sub("", text))


def parse_npy_header(head, where, error):
    """``(dtype, shape, fortran_order, data_offset, nbytes)`` of the ``.npy`` whose first
    bytes are ``head`` (at most ``MAX_HEADER_BYTES + 12`` are needed).  Raises ``error``
    naming ``where`` for anything but format 1.0/2.0 with a literal dict of exactly
    ``descr`` (a plain dtype), ``fortran_order`` (a bool) and ``shape`` (a valid shape)."""
    head = bytes(head)
    if head[:6] != _MAGIC or len(head) < 8:
        raise error(f"{where}: bad .npy header: not a .npy array (it starts {head[:8]!r})")
    if head[6] not in _LENGTH_FIELD or head[7] != 0:
        raise error(f"{where}: bad .npy header: unsupported .npy format version "
                    f"{head[6]}.{head[7]} (1.0 and 2.0 are read)")
    start = 8 + struct.calcsize(_LENGTH_FIELD[head[6]])
    (length,) = struct.unpack(_LENGTH_FIELD[head[6]], head[8:start]) \
        if len(head) >= start else (-1,)
    if not 0 <= length <= MAX_HEADER_BYTES or len(head) < start + length:
        raise error(f"{where}: .npy header length {length} is past the end of the data or "
                    f"over {MAX_HEADER_BYTES} bytes")
    try:
        d = _literal_header(head[start:start + length], head[6])
        ok = (isinstance(d, dict) and set(d) == {"descr", "fortran_order", "shape"}
              and isinstance(d["shape"], tuple) and type(d["fortran_order"]) is bool)
        dtype = descr_to_dtype(d["descr"]) if ok else None
    except (ValueError, TypeError, SyntaxError, KeyError, IndexError, RecursionError,
            MemoryError, OverflowError) as e:
        raise error(f"{where}: bad .npy header ({type(e).__name__}: {e})") from None
    if not ok:
        raise error(f"{where}: bad .npy header {str(d)[:200]}: not a dict of exactly "
                    "descr, fortran_order (a bool) and shape (a tuple)")
    if not numeric_dtype(dtype, also="SU") or dtype.itemsize == 0:
        raise error(f"{where}: dtype {dtype} is refused (it is not loaded: only numbers, "
                    "bool and fixed-width bytes/text are; Python objects would need a pickle)")
    shape = check_shape(list(d["shape"]), where, "the array", error)
    return dtype, shape, d["fortran_order"], start + length, math.prod(shape) * dtype.itemsize


def _check_size(where, shape, dtype, nbytes, have, container, error):
    """The data must be exactly what the header declares: no more (hidden bytes), no less."""
    if nbytes != have:
        raise error(f"{where}: the header declares shape {shape} of {dtype}, which needs "
                    f"{nbytes} bytes, the {container} has {have}")


def npy_from_bytes(raw, where, error=NpzFormatError):
    """The array stored in ``raw`` (a uint8 array holding one whole ``.npy``): a view of
    it, or an aligned copy when the data is not aligned for its dtype."""
    dtype, shape, fortran, offset, nbytes = parse_npy_header(
        raw[:MAX_HEADER_BYTES + 12].tobytes(), where, error)
    _check_size(where, shape, dtype, nbytes, raw.size - offset, "member", error)
    array = raw[offset:].view(dtype).reshape(shape, order="F" if fortran else "C")
    return array if array.flags.aligned else array.copy()


def open_npy(path, where=""):
    """The array of the ``.npy`` file ``path``, memory-mapped read-only, after checking
    that it is a regular file holding exactly the bytes its header declares.  ``where``
    (the caller) prefixes messages."""
    where = f"{where}: {path}" if where else os.fspath(path)
    check_regular_file(path, NpyFormatError)
    with open(path, "rb") as f:
        head = f.read(MAX_HEADER_BYTES + 12)
    dtype, shape, fortran, offset, nbytes = parse_npy_header(head, where, NpyFormatError)
    _check_size(where, shape, dtype, nbytes, os.path.getsize(path) - offset, "file",
                NpyFormatError)
    if nbytes == 0:                     # an empty file region cannot be mapped
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype, "r", offset, shape, order="F" if fortran else "C")


def _open_npz(path, who):
    check_regular_file(path, NpzFormatError)
    try:
        return zipfile.ZipFile(path)
    except ZIP_ERRORS as e:
        raise NpzFormatError(f"{who}{path} is not a readable .npz archive: it is not a .npz "
                             f"file (a zip of .npy arrays) ({type(e).__name__}: {e})") from None


def read_npz(path, keys=None, max_inflation=None, who="", label="member {!r}"):
    """``{name: array}`` of the ``.npz`` archive ``path``: every member, or (``keys``) the
    members ``key + ".npy"``.  Every member must be a ``.npy`` array; those read are
    inflated within ``ReadBudget(path, max_inflation)``.  A missing key raises
    ``NpzKeyError`` naming the keys there are.  ``who`` prefixes messages (the caller,
    e.g. ``"NpzDataset: "``) and ``label`` spells a member's file name in them."""
    path = os.fspath(path)
    budget = ReadBudget(path, NpzFormatError, max_inflation)
    with _open_npz(path, who) as archive:
        members = {}
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                raise NpzFormatError(f"{who}{path}: {label.format(info.filename)} is not "
                                     "a .npy array")
            members[info.filename[:-4]] = info
        for key in keys or ():
            if key not in members:
                raise NpzKeyError(f"{who}{path} has no array {key!r}; it has "
                                  f"{sorted(members)}")
        return {name: npy_from_bytes(read_zip_member(archive, members[name], budget),
                                     f"{who}{path}: {label.format(name + '.npy')}")
                for name in (members if keys is None else keys)}
