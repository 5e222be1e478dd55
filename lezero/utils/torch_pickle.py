"""Read PyTorch ``.pt`` / ``.pth`` files without torch, and without running their code.

``torch.save`` writes a zip archive::

    <name>/data.pkl      a pickle of the object; each tensor is a call to
                         torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)
                         whose storage is a *persistent id*
                         ('storage', torch.FloatStorage, key, location, numel)
    <name>/data/<key>    the raw bytes of each storage
    <name>/byteorder     'little' or 'big'

A pickle is a small program: its GLOBAL opcodes import any callable and its REDUCE opcodes
call it, which is how a malicious file runs ``os.system``.  ``_SafeUnpickler.find_class``
therefore resolves only an explicit allow-list, and every torch name on it maps to a
function of this module that builds NumPy arrays; anything else raises
``UnsafePickleError`` naming the refused global, before it could be called.  Storages
become NumPy arrays read from the archive; tensors become (strided) views of them, so
tensors that shared a storage in PyTorch share memory here too.  Offsets, sizes and strides
are checked against the storage, so a hostile file cannot read outside it.

The result is plain Python: an ``OrderedDict`` state_dict loads as a ``dict`` of arrays,
``nn.Parameter`` loads as its array, other containers and numbers as themselves.

The legacy format (PyTorch < 1.6, or ``_use_new_zipfile_serialization=False``) is read
too: a few pickles in a row followed by the raw storages, through the same unpickler.
"""
import _compat_pickle
import collections
import math
import pickle
import zipfile

import numpy as np

from lezero.utils import safetensors as st


class UnsafePickleError(pickle.UnpicklingError):
    """The file asked for a global that is not on the allow-list (it may be malicious)."""


class _Kind:
    """A torch storage class or dtype from the pickle: the element type it stands for.

    ``spec`` is a NumPy dtype string (``'<f4'``) or the name of a dtype NumPy lacks
    (``'bfloat16'``, ``'float8_e4m3fn'``)."""

    def __init__(self, name, spec):
        self.name, self.spec = name, spec

    def __repr__(self):
        return f"torch.{self.name}"


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
            raise pickle.UnpicklingError(f"storage {self.key}: {self.raw.size} bytes is not a "
                                         f"whole number of {dtype} elements")
        if dtype.itemsize > 1:
            dtype = dtype.newbyteorder("<" if self.byteorder == "little" else ">")
        array = self.raw.view(dtype)
        return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def _strided_view(storage, spec, offset, size, stride):
    """The tensor ``(offset, size, stride)`` (in elements) of ``storage``, bounds-checked."""
    where = f"tensor in storage {storage.key}"
    if not (isinstance(offset, int) and offset >= 0 and isinstance(size, (tuple, list))
            and isinstance(stride, (tuple, list)) and len(size) == len(stride)
            and all(isinstance(n, int) and n >= 0 for n in size)
            and all(isinstance(s, int) and s >= 0 for s in stride)):
        raise pickle.UnpicklingError(f"{where}: invalid layout offset={offset!r} "
                                     f"size={size!r} stride={stride!r}")
    elements = storage.elements(spec)
    if math.prod(size) == 0:
        return np.empty(tuple(size), elements.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= elements.size:
        raise pickle.UnpicklingError(f"{where}: the view (offset {offset}, size {tuple(size)}, "
                                     f"stride {tuple(stride)}) reaches element {last} of a "
                                     f"storage of {elements.size}")
    item = elements.itemsize
    return np.lib.stride_tricks.as_strided(elements[offset:], shape=tuple(size),
                                           strides=tuple(s * item for s in stride))


# ----- the functions the allow-list maps torch's names to --------------------------------
def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None,
                       metadata=None):
    _expect_storage(storage)
    return _strided_view(storage, storage.kind.spec, offset, size, stride)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype,
                       metadata=None):
    _expect_storage(storage)
    if not isinstance(dtype, _Kind):
        raise pickle.UnpicklingError(f"_rebuild_tensor_v3: expected a torch dtype, got {dtype!r}")
    return _strided_view(storage, dtype.spec, offset, size, stride)


def _rebuild_parameter(data, requires_grad=True, hooks=None, state=None):
    return data                       # a Parameter loads as its array


def _rebuild_from_type_v2(func, new_type, args, state):
    """Tensor subclasses (Parameter among them) pickle through this: rebuild the plain
    tensor with ``func``, which must itself be one of ours."""
    if func not in _REBUILDERS or new_type not in _TENSOR_TYPES.values():
        raise UnsafePickleError(f"_rebuild_from_type_v2: refusing to call {func!r} for "
                                f"{new_type!r}")
    return func(*args)


def _expect_storage(storage):
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError(f"expected a storage, got {type(storage).__name__}")


def _codecs_encode(text, encoding="utf-8"):
    """Pickle protocol 2 writes bytes as ``_codecs.encode(str, 'latin1')``."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"_codecs.encode: only (str, 'latin1') is allowed, got "
                                f"({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


_NDARRAY = _Kind("ndarray", None)   # stands for numpy.ndarray: data, not a callable class


def _numpy_reconstruct(subtype, shape, dtype):
    """numpy's pickled arrays: an empty ndarray that BUILD then fills (and checks)."""
    if subtype is not _NDARRAY:
        raise UnsafePickleError(f"numpy _reconstruct: refusing subtype {subtype!r}")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _numpy_scalar(dtype, data=None):
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise UnsafePickleError(f"numpy scalar: refusing dtype {dtype!r}")
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise pickle.UnpicklingError(f"numpy scalar: expected {dtype.itemsize} bytes of data")
    return np.frombuffer(data, dtype)[0]


_REBUILDERS = (_rebuild_tensor_v2, _rebuild_tensor_v3)
_TENSOR_TYPES = {("torch", "Tensor"): _Kind("Tensor", None),
                 ("torch.nn.parameter", "Parameter"): _Kind("Parameter", None)}

_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch", "Size"): tuple,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("_codecs", "encode"): _codecs_encode,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct,
    ("numpy.core.multiarray", "scalar"): _numpy_scalar,
    ("numpy._core.multiarray", "scalar"): _numpy_scalar,
}
_ALLOWED.update(_TENSOR_TYPES)
_ALLOWED.update({("torch", name): kind for name, kind in _DTYPES.items()})
_ALLOWED.update({("torch", name): kind for name, kind in _STORAGES.items()})
_ALLOWED[("torch.storage", "UntypedStorage")] = _STORAGES["UntypedStorage"]


class _SafeUnpickler(pickle.Unpickler):
    """An Unpickler that resolves globals only from ``_ALLOWED`` and persistent ids only
    through ``storages`` (None: the pickle may not reference storages)."""

    def __init__(self, file, where, storages=None):
        super().__init__(file)
        self._where, self._storages = where, storages

    def find_class(self, module, name):
        # protocol-2 pickles use Python 2 names (__builtin__, commands): translate them as
        # pickle itself does, so the allow-list and the error speak Python 3
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        found = _ALLOWED.get((module, name))
        if found is None:
            raise UnsafePickleError(
                f"{self._where}: refusing to load global '{module}.{name}': only tensors, "
                "containers and numbers are allowed (this file may run code if loaded with "
                "pickle; if you trust it, load it with torch and save its tensors as "
                ".safetensors)")
        return found

    def persistent_load(self, pid):
        if (self._storages is None or not isinstance(pid, tuple) or len(pid) < 5
                or pid[0] != "storage"):
            raise pickle.UnpicklingError(f"{self._where}: unexpected persistent id {pid!r}")
        kind, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(kind, _Kind) or kind.name not in _STORAGES:
            raise pickle.UnpicklingError(f"{self._where}: unknown storage type {kind!r}")
        if not isinstance(key, str) or not key.isalnum():
            raise pickle.UnpicklingError(f"{self._where}: invalid storage key {key!r}")
        if not isinstance(numel, int) or numel < 0:
            raise pickle.UnpicklingError(f"{self._where}: invalid storage size {numel!r}")
        return self._storages.get(kind, key, numel, pid[5:])


class _ZipStorages:
    """Storages of a zip checkpoint: ``<prefix>data/<key>`` members, read on first use."""

    def __init__(self, archive, prefix, byteorder, where):
        self.archive, self.prefix, self.byteorder, self.where = archive, prefix, byteorder, where
        self.loaded = {}

    def get(self, kind, key, numel, extra):
        if extra:
            raise pickle.UnpicklingError(f"{self.where}: unexpected storage view {extra!r}")
        if key not in self.loaded:
            name = f"{self.prefix}data/{key}"
            try:
                info = self.archive.getinfo(name)
            except KeyError:
                raise pickle.UnpicklingError(f"{self.where}: the archive has no "
                                             f"{name!r}") from None
            raw = np.empty(info.file_size, np.uint8)
            with self.archive.open(info) as f:
                if info.file_size and f.readinto(memoryview(raw)) != info.file_size:
                    raise pickle.UnpicklingError(f"{self.where}: {name!r} is truncated")
            self.loaded[key] = _Storage(key, raw, kind, self.byteorder)
        return self.loaded[key]


class _LegacyStorages:
    """Storages of a legacy (non-zip) file.  Their bytes follow the main pickle, so each
    storage is allocated when first referenced (tensor views are made on it) and filled
    afterwards by ``fill``."""

    def __init__(self, where):
        self.where = where
        self.roots = {}
        self.views = []

    def get(self, kind, key, numel, extra):
        itemsize = _itemsize(kind.spec)
        if key not in self.roots:
            self.roots[key] = _Storage(key, np.zeros(numel * itemsize, np.uint8), kind,
                                       "little")
        root = self.roots[key]
        view = extra[0] if extra else None
        if view is None:
            return root
        if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str)
                and all(isinstance(v, int) and v >= 0 for v in view[1:])
                and (view[1] + view[2]) * itemsize <= root.raw.size):
            raise pickle.UnpicklingError(f"{self.where}: invalid storage view {view!r}")
        _, offset, size = view
        part = _Storage(view[0], root.raw[offset * itemsize:(offset + size) * itemsize], kind,
                        "little")
        self.views.append(part)
        return part

    def fill(self, f, keys):
        """Read each storage's bytes (an int64 element count, then the data) in order."""
        if not isinstance(keys, list) or set(keys) != set(self.roots):
            raise pickle.UnpicklingError(f"{self.where}: the storage key list does not match "
                                         "the storages the pickle uses")
        for key in keys:
            root = self.roots[key]
            head = f.read(8)
            count = int.from_bytes(head, "little") if len(head) == 8 else -1
            if count * _itemsize(root.kind.spec) != root.raw.size:
                raise pickle.UnpicklingError(f"{self.where}: storage {key} holds {count} "
                                             "elements, not the size the pickle declared")
            if root.raw.size and f.readinto(memoryview(root.raw)) != root.raw.size:
                raise pickle.UnpicklingError(f"{self.where}: file truncated in storage {key}")
        for storage in list(self.roots.values()) + self.views:
            storage.refresh()


def _itemsize(spec):
    return st.EXTRA_DTYPES[spec][1].itemsize if spec in st.EXTRA_DTYPES else np.dtype(spec).itemsize


def _plain(obj):
    """OrderedDicts (and their ``_metadata``) become dicts, recursively; torch dtypes
    become NumPy dtypes (or the name, for ``'bfloat16'`` and the float8 types)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_plain(v) for v in obj)
    if isinstance(obj, _Kind) and obj.spec is not None:     # a torch dtype
        return obj.spec if obj.spec in st.EXTRA_DTYPES else np.dtype(obj.spec)
    if isinstance(obj, _Storage):                            # a storage saved on its own
        return obj.elements(obj.kind.spec)
    return obj


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def load_torch(path):
    """Load a file written by ``torch.save`` as nested dicts/lists of NumPy arrays."""
    where = str(path)
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            return _plain(_load_legacy(f, where))
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if not pickles:
            kind = "a TorchScript archive" if any(n.endswith("constants.pkl") for n in names) \
                else "a zip file without data.pkl"
            raise ValueError(f"{where}: {kind}, not a torch.save checkpoint")
        prefix = pickles[0][:-len("data.pkl")]
        byteorder = "little"
        if prefix + "byteorder" in names:
            byteorder = archive.read(prefix + "byteorder").decode("ascii").strip()
            if byteorder not in ("little", "big"):
                raise ValueError(f"{where}: unknown byteorder {byteorder!r}")
        storages = _ZipStorages(archive, prefix, byteorder, where)
        with archive.open(pickles[0]) as f:
            obj = _SafeUnpickler(f, where, storages).load()
    return _plain(obj)


def _load_legacy(f, where):
    """PyTorch's pre-1.6 format (still written with ``_use_new_zipfile_serialization=False``):
    pickles of the magic number, the protocol version, system info, the object and the list
    of storage keys, then each storage's bytes (little-endian) in that order."""
    def header():
        try:
            return _SafeUnpickler(f, where).load()
        except UnsafePickleError:
            raise
        except Exception:
            return None

    if header() != _LEGACY_MAGIC:
        raise ValueError(f"{where}: not a PyTorch file (neither the zip archive torch.save "
                         "writes nor its legacy format)")
    if header() != _LEGACY_PROTOCOL:
        raise ValueError(f"{where}: unsupported legacy PyTorch protocol version")
    if not isinstance(header(), dict):     # system info; torch ignores it too (data is LE)
        raise ValueError(f"{where}: damaged legacy PyTorch header")
    storages = _LegacyStorages(where)
    obj = _SafeUnpickler(f, where, storages).load()
    storages.fill(f, _SafeUnpickler(f, where).load())
    return obj


__all__ = ["load_torch", "UnsafePickleError"]
