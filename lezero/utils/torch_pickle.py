"""Read PyTorch ``.pt`` / ``.pth`` files without torch, and without running their code.

``torch.save`` writes a zip archive::

    <name>/data.pkl      a pickle of the object; each tensor is a call to
                         torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)
                         whose storage is a *persistent id*
                         ('storage', torch.FloatStorage, key, location, numel)
    <name>/data/<key>    the raw bytes of each storage
    <name>/byteorder     'little' or 'big'

A pickle is a small program: GLOBAL imports any callable and REDUCE calls it (how a
malicious file runs ``os.system``).  ``_SafeUnpickler`` (a
``numpy_pickle.RestrictedUnpickler``) therefore resolves only an allow-list: torch's
rebuild functions, dtypes and storage types mapped to functions of this module, and the
NumPy constructors of ``lezero.utils.numpy_pickle`` (plain numeric dtypes only); anything
else raises ``UnsafePickleError`` before it could be called.  BUILD (``__setstate__`` or
attribute writes) is the other way in: it may only give a state to an OrderedDict
(dropped) and to NumPy's dtype and array, which check it.  Storages are read from the
archive
(charged to a ``ReadBudget``: no zip bombs); tensors are bounds-checked (strided) views of
them, so tensors that shared a storage in PyTorch share memory here too.

The result is plain Python: a state_dict loads as a ``dict`` of arrays, ``nn.Parameter``
as its array, containers and numbers as themselves.  Every failure is a ``TorchFileError``
(a ``ValueError``) naming the file.  The legacy format (PyTorch < 1.6: pickles in a row,
then the raw storages) goes through the same unpickler.
"""
import collections
import io
import math
import os
import pickle
import struct
import zipfile
import zlib

import numpy as np

from lezero.utils import numpy_pickle as npk
from lezero.utils import safetensors as st
from lezero.utils.files import (MAX_DEPTH, FileFormatError, ReadBudget, open_zip,
                                read_zip_member)


class TorchFileError(FileFormatError, pickle.UnpicklingError):
    """A ``.pt``/``.pth`` file is malformed; the message names the file and what is wrong."""


class UnsafePickleError(TorchFileError):
    """The file asked for a global that is not on the allow-list, or to change one of the
    allowed objects (it may be malicious)."""


class _Kind:
    """A torch storage class or dtype: its element type ``spec``, a NumPy dtype string
    (``'<f4'``) or the name of one NumPy lacks (``'bfloat16'``, ``'float8_e4m3fn'``)."""

    def __init__(self, name, spec):
        self.name, self.spec = name, spec

    def __repr__(self):
        return f"torch.{self.name}"


class _StateDict(collections.OrderedDict):
    """``OrderedDict`` to the pickle: BUILD may only give it an attribute dict (torch's
    ``_metadata``), which is dropped."""

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise UnsafePickleError(f"refusing OrderedDict state of type {type(state).__name__}")


# element type of each torch dtype name (several names alias one dtype)
_DTYPE_SPECS = {
    "float32": "<f4", "float": "<f4", "float64": "<f8", "double": "<f8",
    "float16": "<f2", "half": "<f2", "bfloat16": "bfloat16",
    "int64": "<i8", "long": "<i8", "int32": "<i4", "int": "<i4", "int16": "<i2",
    "short": "<i2", "int8": "i1", "uint8": "u1", "bool": "?", "uint16": "<u2",
    "uint32": "<u4", "uint64": "<u8", "complex64": "<c8", "cfloat": "<c8",
    "complex128": "<c16", "cdouble": "<c16", "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
}
_STORAGE_SPECS = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2",
    "BFloat16Storage": "bfloat16", "LongStorage": "<i8", "IntStorage": "<i4",
    "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
    "ComplexFloatStorage": "<c8", "ComplexDoubleStorage": "<c16", "UntypedStorage": "u1",
}
_DTYPES = {name: _Kind(name, spec) for name, spec in _DTYPE_SPECS.items()}
_STORAGES = {name: _Kind(name, spec) for name, spec in _STORAGE_SPECS.items()}


class _Storage:
    """One storage of the archive: its raw bytes, typed on demand."""

    def __init__(self, key, raw, kind, byteorder):
        self.key, self.raw, self.kind, self.byteorder = key, raw, kind, byteorder
        self._typed = {}

    def elements(self, spec):
        """The storage as a 1-d array of ``spec`` elements (decoded once per spec)."""
        if spec not in self._typed:
            if spec in st.EXTRA_DTYPES:
                bits = st.EXTRA_DTYPES[spec][1]
                array = st.from_bits(self._view(bits), spec)
            else:
                array = self._view(np.dtype(spec))
            self._typed[spec] = array
        return self._typed[spec]

    def refresh(self):
        """Decode again after ``raw`` was filled in place (legacy files): views of plain
        dtypes follow ``raw`` by themselves; converted ones (bfloat16 -> float32) are
        rewritten in place so tensors made on them see the data."""
        for spec, array in self._typed.items():
            if spec in st.EXTRA_DTYPES:
                array[...] = st.from_bits(self._view(st.EXTRA_DTYPES[spec][1]), spec)

    def _view(self, dtype):
        if self.raw.size % dtype.itemsize:
            raise TorchFileError(f"storage {self.key}: {self.raw.size} bytes is not a "
                                 f"whole number of {dtype} elements")
        if dtype.itemsize > 1:
            dtype = dtype.newbyteorder("<" if self.byteorder == "little" else ">")
        array = self.raw.view(dtype)
        return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def _strided_view(storage, kind, offset, size, stride):
    """The tensor ``(offset, size, stride)`` (in elements of ``kind``) of ``storage``,
    bounds-checked."""
    if not isinstance(storage, _Storage):
        raise TorchFileError(f"expected a storage, got {type(storage).__name__}")
    where = f"tensor in storage {storage.key}"
    if not (type(offset) is int and offset >= 0 and isinstance(stride, (tuple, list))
            and isinstance(size, (tuple, list)) and len(size) == len(stride)
            and all(type(s) is int and s >= 0 for s in stride)):
        raise TorchFileError(f"{where}: invalid layout offset={offset!r} size={size!r} "
                             f"stride={stride!r}")
    size = st.check_shape(size, where, "the tensor", TorchFileError)
    elements = storage.elements(kind.spec)
    if math.prod(size) == 0:
        return np.empty(size, elements.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= elements.size:
        raise TorchFileError(f"{where}: the view (offset {offset}, size {size}, stride "
                             f"{tuple(stride)}) reaches element {last} of a storage of "
                             f"{elements.size}")
    item = elements.itemsize
    return np.lib.stride_tricks.as_strided(elements[offset:], shape=size,
                                           strides=tuple(s * item for s in stride))


# ----- the functions the allow-list maps torch's names to ---------------------------------
def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None,
                       metadata=None):
    return _strided_view(storage, getattr(storage, "kind", None), offset, size, stride)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype,
                       metadata=None):
    if not (isinstance(dtype, _Kind) and _DTYPES.get(dtype.name) is dtype):
        raise TorchFileError(f"_rebuild_tensor_v3: expected a torch dtype, got {dtype!r}")
    return _strided_view(storage, dtype, offset, size, stride)


def _rebuild_parameter(data, requires_grad=True, hooks=None, state=None):
    return data                       # a Parameter loads as its array


def _rebuild_from_type_v2(func, new_type, args, state):
    """Tensor subclasses (Parameter among them) pickle through this: rebuild the plain
    tensor with ``func``, which must itself be one of ours."""
    if func not in _REBUILDERS or new_type not in _TENSOR_TYPES.values():
        raise UnsafePickleError(f"_rebuild_from_type_v2: refusing to call {func!r} for "
                                f"{new_type!r}")
    return func(*args)


_TENSOR_TYPES = {("torch", "Tensor"): _Kind("Tensor", None),
                 ("torch.nn.parameter", "Parameter"): _Kind("Parameter", None)}
_FUNCTIONS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
}
_ALLOWED = dict(_FUNCTIONS)
_ALLOWED.update(npk.NUMPY_GLOBALS)
_ALLOWED.update({
    ("collections", "OrderedDict"): _StateDict, ("torch", "Size"): tuple,
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
})
_ALLOWED.update(_TENSOR_TYPES)
_ALLOWED.update({("torch", name): kind for name, kind in _DTYPES.items()})
_ALLOWED.update({("torch", name): kind for name, kind in _STORAGES.items()})
_ALLOWED[("torch.storage", "UntypedStorage")] = _STORAGES["UntypedStorage"]
_REBUILDERS = (_rebuild_tensor_v2, _rebuild_tensor_v3)


class _SafeUnpickler(npk.RestrictedUnpickler):
    """The restricted unpickler with torch's allow-list; persistent ids (storages) resolve
    only through ``storages`` (None: the pickle may not reference storages).  Whatever the
    shared NumPy constructors refuse becomes an ``UnsafePickleError``."""

    allowed = _ALLOWED
    buildable = npk.RestrictedUnpickler.buildable + (_StateDict,)

    def __init__(self, file, where, storages=None):
        super().__init__(file, where)
        self._storages = storages

    def load(self):
        try:
            return super().load()
        except npk.NotAllowed as e:
            raise UnsafePickleError(str(e)) from None

    def refused(self, module, name):
        return UnsafePickleError(
            f"{self.where}: refusing to load global '{module}.{name}': only tensors, "
            "containers and numbers are allowed (this file may run code if loaded with "
            "pickle; if you trust it, load it with torch and save its tensors as "
            ".safetensors)")

    def persistent_load(self, pid):
        if (self._storages is None or not isinstance(pid, tuple) or len(pid) < 5
                or pid[0] != "storage"):
            raise TorchFileError(f"{self.where}: unexpected persistent id {pid!r}")
        kind, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(kind, _Kind) or _STORAGES.get(kind.name) is not kind:
            raise TorchFileError(f"{self.where}: unknown storage type {kind!r}")
        if not isinstance(key, str) or not (key.isascii() and key.isalnum()):
            raise TorchFileError(f"{self.where}: invalid storage key {key!r}")
        if type(numel) is not int or numel < 0:
            raise TorchFileError(f"{self.where}: invalid storage size {numel!r}")
        return self._storages.get(kind, key, numel, pid[5:])


class _ZipStorages:
    """Storages of a zip checkpoint: ``<prefix>data/<key>`` members, read on first use,
    each charged to the archive's ``budget`` before it is inflated."""

    def __init__(self, archive, prefix, byteorder, budget):
        self.archive, self.prefix, self.byteorder = archive, prefix, byteorder
        self.budget, self.where = budget, budget.where
        self.loaded = {}

    def get(self, kind, key, numel, extra):
        if extra:
            raise TorchFileError(f"{self.where}: unexpected storage view {extra!r}")
        if key not in self.loaded:
            name = f"{self.prefix}data/{key}"
            if name not in self.archive.NameToInfo:
                raise TorchFileError(f"{self.where}: the archive has no {name!r}")
            raw = read_zip_member(self.archive, self.archive.getinfo(name), self.budget)
            self.loaded[key] = _Storage(key, raw, kind, self.byteorder)
        return self.loaded[key]


class _LegacyStorages:
    """Storages of a legacy (non-zip) file.  Their bytes follow the main pickle, so each
    storage is allocated when first referenced (tensor views are made on it) and filled
    afterwards by ``fill``; together they cannot be larger than the file."""

    def __init__(self, where, file_size):
        self.where, self.left = where, file_size
        self.roots = {}
        self.views = []

    def get(self, kind, key, numel, extra):
        itemsize = _itemsize(kind.spec)
        if key not in self.roots:
            if numel * itemsize > self.left:
                raise TorchFileError(f"{self.where}: storage {key} declares {numel} elements, "
                                     "more than the file holds")
            self.left -= numel * itemsize
            self.roots[key] = _Storage(key, np.zeros(numel * itemsize, np.uint8), kind,
                                       "little")
        root = self.roots[key]
        view = extra[0] if extra else None
        if view is None:
            return root
        if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str)
                and all(type(v) is int and v >= 0 for v in view[1:])
                and (view[1] + view[2]) * itemsize <= root.raw.size):
            raise TorchFileError(f"{self.where}: invalid storage view {view!r}")
        _, offset, size = view
        part = _Storage(view[0], root.raw[offset * itemsize:(offset + size) * itemsize], kind,
                        "little")
        self.views.append(part)
        return part

    def fill(self, f, keys):
        """Read each storage's bytes (an int64 element count, then the data) in order."""
        if not isinstance(keys, list) or len(keys) != len(self.roots) \
                or set(keys) != set(self.roots):
            raise TorchFileError(f"{self.where}: the storage key list does not match "
                                 "the storages the pickle uses")
        for key in keys:
            root = self.roots[key]
            head = f.read(8)
            count = int.from_bytes(head, "little") if len(head) == 8 else -1
            if count * _itemsize(root.kind.spec) != root.raw.size:
                raise TorchFileError(f"{self.where}: storage {key} holds {count} "
                                     "elements, not the size the pickle declared")
            if root.raw.size and f.readinto(memoryview(root.raw)) != root.raw.size:
                raise TorchFileError(f"{self.where}: file truncated in storage {key}")
        for storage in list(self.roots.values()) + self.views:
            storage.refresh()


def _itemsize(spec):
    return st.EXTRA_DTYPES[spec][1].itemsize if spec in st.EXTRA_DTYPES else np.dtype(spec).itemsize


def _torch_value(x):
    """A torch dtype as a NumPy dtype (or the name, for bfloat16/float8); a storage saved
    on its own as its elements."""
    if isinstance(x, _Kind) and x.spec is not None:
        return x.spec if x.spec in st.EXTRA_DTYPES else np.dtype(x.spec)
    if isinstance(x, _Storage):
        return x.elements(x.kind.spec)
    return x


def _plain(obj, where):
    """The unpickled object as plain Python (see ``numpy_pickle.plain``): OrderedDicts
    become dicts, NumPy values are unwrapped, torch dtypes become NumPy dtypes."""
    return npk.plain(obj, where, TorchFileError, _torch_value)


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001
# what a malformed file makes the unpickler, NumPy or zipfile raise: TorchFileError
_MALFORMED = (pickle.UnpicklingError, ValueError, TypeError, KeyError, IndexError,
              AttributeError, OverflowError, RecursionError, EOFError, struct.error,
              zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)


def load_torch(path, max_inflation=None):
    """Load a file written by ``torch.save`` as nested dicts/lists of NumPy arrays.

    Raises ``TorchFileError`` (a ``ValueError``; ``UnsafePickleError`` for a refused
    global) naming the file for anything malformed.  A zip member may inflate to at most
    ``max_inflation`` (default ``lezero.utils.files.MAX_INFLATION``) times the file's
    size in total."""
    where = os.fspath(path)
    budget = ReadBudget(where, TorchFileError, max_inflation)
    try:
        with open(where, "rb") as f:
            if not zipfile.is_zipfile(f):
                f.seek(0)
                return _plain(_load_legacy(f, where), where)
        with open_zip(where, TorchFileError, "a PyTorch zip archive") as archive:
            return _plain(_load_zip(archive, budget), where)
    except TorchFileError as e:       # raised where the file's name is not known: add it
        if str(e).startswith(where):
            raise
        raise type(e)(f"{where}: {e}") from None
    except EOFError:
        raise TorchFileError(f"{where}: the pickle is truncated or declares more data than "
                             "the file holds (a corrupt or hostile length field?)") from None
    except _MALFORMED as e:
        raise TorchFileError(f"{where}: malformed PyTorch file ({type(e).__name__}: {e})") \
            from None


def _load_zip(archive, budget):
    where = budget.where
    names = archive.namelist()
    pickles = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if not pickles:
        kind = "a TorchScript archive" if any(n.endswith("constants.pkl") for n in names) \
            else "a zip file without data.pkl"
        raise TorchFileError(f"{where}: {kind}, not a torch.save checkpoint")
    prefix = pickles[0][:-len("data.pkl")]
    byteorder = "little"
    if prefix + "byteorder" in names:
        raw = read_zip_member(archive, archive.getinfo(prefix + "byteorder"), budget, limit=16)
        byteorder = raw.tobytes().decode("ascii", "replace").strip()
        if byteorder not in ("little", "big"):
            raise TorchFileError(f"{where}: unknown byteorder {byteorder!r}")
    storages = _ZipStorages(archive, prefix, byteorder, budget)
    data = read_zip_member(archive, archive.getinfo(pickles[0]), budget)
    return _SafeUnpickler(io.BytesIO(data), where, storages).load()


def _load_legacy(f, where):
    """PyTorch's pre-1.6 format (still written with ``_use_new_zipfile_serialization=False``):
    pickles of the magic number, the protocol version, system info, the object and the list
    of storage keys, then each storage's bytes (little-endian) in that order."""
    def header():
        try:
            return _SafeUnpickler(_Capped(f), where).load()
        except UnsafePickleError:
            raise
        except Exception:
            return None

    if header() != _LEGACY_MAGIC:
        raise TorchFileError(f"{where}: not a PyTorch file (neither the zip archive "
                             "torch.save writes nor its legacy format)")
    if header() != _LEGACY_PROTOCOL:
        raise TorchFileError(f"{where}: unsupported legacy PyTorch protocol version")
    if not isinstance(header(), dict):     # system info; torch ignores it too (data is LE)
        raise TorchFileError(f"{where}: damaged legacy PyTorch header")
    storages = _LegacyStorages(where, os.fstat(f.fileno()).st_size)
    obj = _SafeUnpickler(_Capped(f), where, storages).load()
    storages.fill(f, _SafeUnpickler(_Capped(f), where).load())
    return obj


class _Capped:
    """A file whose ``read(n)`` asks for no more than is left: ``read(2**40)`` on a plain
    file allocates the 2**40 bytes before finding out the file is short."""

    def __init__(self, f):
        self.f, self.size = f, os.fstat(f.fileno()).st_size
        self.readline, self.readinto = f.readline, f.readinto

    def read(self, n=-1):
        return self.f.read(min(n, max(0, self.size - self.f.tell())) if n >= 0 else -1)


__all__ = ["load_torch", "TorchFileError", "UnsafePickleError", "MAX_DEPTH"]
