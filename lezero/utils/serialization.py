"""``lz.save(obj, path)`` and ``lz.load(path)``: checkpoints as .npz, HDF5 or safetensors,
and PyTorch ``.pt``/``.pth`` files read without torch.

``obj`` is any nesting of dicts, lists and tuples whose leaves are arrays (NumPy or CuPy),
Variables/Parameters (saved as their arrays), NumPy scalars, Python numbers, strings,
bools and None: a model's ``state_dict()``, an optimizer's, a scheduler's, an epoch number.
The format is picked by the extension:

========================  ====================================================================
``.npz``                  one ``.npy`` member per array plus ``__lezero__``: a JSON skeleton
``.h5`` / ``.hdf5``       one dataset per array, nested in groups like the dicts (needs h5py)
``.safetensors``          one tensor per array; the skeleton goes in ``__metadata__``
``.pt`` / ``.pth``        read only: see ``lezero.utils.torch_pickle``
========================  ====================================================================

The *skeleton* is JSON describing the nesting: dicts keep their key types (an optimizer's
parameter indices stay ints), tuples stay tuples, and each array leaf names the stored
array.  Arrays come back as NumPy arrays: CuPy arrays, Variables and Parameters all load
as ``numpy.ndarray`` (move them with ``cuda.as_cupy``; ``Module.load_state_dict`` copies
them into its parameters).  Files written by other tools (a plain ``np.savez``, an HDF5
file, a Hugging Face safetensors file) load as dicts of arrays.

Every write is atomic: the data goes to a temporary file in the target's directory, is
flushed to disk (fsync) and then renamed over the target, so a crash mid-save leaves the
previous file intact.

Loading treats the file as data from a stranger: each format accepts plain numeric arrays
(and fixed-width bytes/text in .npz/.h5) only, checks every declared size before
allocating, bounds what compressed data may inflate to (``max_inflation``), refuses HDF5
links, external and virtual storage that reach outside the file, and raises one error type
per format -- ``NpzFormatError``, ``HDF5FormatError``, ``SafetensorsError``,
``TorchFileError``, all ``FileFormatError`` (a ``ValueError``) -- naming the file.  The
readers are LeZero's one reader per format (``lezero.utils.npy``, ``hdf5``,
``safetensors``, ``torch_pickle``), shared with ``lezero.data``'s datasets.
"""
import json
import os
import zipfile

import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.utils import hdf5
from lezero.utils import safetensors as st
from lezero.utils.files import MAX_DEPTH, FileFormatError, ReadBudget, atomic_write
from lezero.utils.hdf5 import HDF5FormatError
from lezero.utils.npy import NpzFormatError, read_npz
from lezero.utils.safetensors import SafetensorsError
from lezero.utils.torch_pickle import TorchFileError, UnsafePickleError, load_torch

__all__ = ["save", "load", "flatten", "unflatten", "FileFormatError", "NpzFormatError",
           "HDF5FormatError", "SafetensorsError", "TorchFileError", "UnsafePickleError",
           "MAX_DEPTH", "SAVE_EXTENSIONS"]

SKELETON = "__lezero__"       # the member / dataset / metadata key holding the skeleton
FORMAT_VERSION = 1
_TOP = "_"                    # array name when the whole object is one array

# ----- the skeleton -------------------------------------------------------------------------
_KEY_TYPES = (str, int, float, bool, type(None))


def _component(key):
    """A path component for ``key``, safe as an HDF5 name and a zip member name."""
    text = str(key).replace("%", "%25").replace("/", "%2F")
    return {"": "%00", ".": "%2E", "..": "%2E%2E"}.get(text, text)


def flatten(obj):
    """Split ``obj`` into ``(skeleton, arrays)``: a JSON-able description of the nesting and
    a dict of name -> NumPy array.  Raises TypeError naming the key path of anything that
    cannot be saved."""
    arrays = {}

    def visit(x, names, where):
        if len(names) > MAX_DEPTH:
            raise ValueError(f"lz.save: {where} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(x, Variable):
            x = x.data
        if isinstance(x, np.generic) or isinstance(x, cuda.array_types()):
            return array_leaf(x, names, where)
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, dict):
            items, used = [], {SKELETON} if not names else set()
            for k, v in x.items():
                if not isinstance(k, _KEY_TYPES):
                    raise TypeError(f"lz.save: dict key {k!r} at {where or 'the top'} has type "
                                    f"{type(k).__name__}; keys must be str, int, float, bool "
                                    "or None")
                name, n = _component(k), 1
                while name in used:          # int 0 and str "0" both want "0"
                    name, n = f"{_component(k)}~{n}", n + 1
                used.add(name)
                items.append([k, visit(v, names + [name], f"{where}[{k!r}]")])
            return {"$": "dict", "items": items}
        if isinstance(x, (list, tuple)):
            values = [visit(v, names + [str(i)], f"{where}[{i}]") for i, v in enumerate(x)]
            return values if isinstance(x, list) else {"$": "tuple", "items": values}
        raise TypeError(f"lz.save: cannot save a {type(x).__module__}.{type(x).__name__} at "
                        f"{where or 'the top'} (supported: arrays, Variables, numbers, str, "
                        "bool, None, and dicts/lists/tuples of them)")

    def array_leaf(x, names, where):
        a = np.asarray(cuda.as_numpy(x))
        if a.dtype.hasobject:
            raise TypeError(f"lz.save: the array at {where or 'the top'} has dtype object, "
                            "which cannot be saved without pickle")
        name = "/".join(names) or _TOP
        leaf = {"$": "array", "name": name}
        if isinstance(x, np.generic):
            leaf["scalar"] = True
        extra = st.extra_dtype_name(a.dtype)
        if extra:                    # stored as raw bits, tagged with the real dtype
            leaf["dtype"] = extra
        arrays[name] = a
        return leaf

    return visit(obj, [], ""), arrays


def unflatten(skeleton, arrays, where="lz.load", error=FileFormatError):
    """Rebuild the object from ``flatten``'s skeleton and the arrays read back.  A
    skeleton that does not describe an object (it came from a file) raises ``error``."""
    def build(node, depth):
        if depth > MAX_DEPTH:
            raise error(f"{where}: the skeleton nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, list):
            return [build(v, depth + 1) for v in node]
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        tag = node.get("$") if isinstance(node, dict) else None
        items = node.get("items") if isinstance(node, dict) else None
        if tag == "tuple" and isinstance(items, list):
            return tuple(build(v, depth + 1) for v in items)
        if tag == "dict" and isinstance(items, list) and all(
                isinstance(i, list) and len(i) == 2 and isinstance(i[0], _KEY_TYPES)
                for i in items):
            return {k: build(v, depth + 1) for k, v in items}
        if tag == "array":
            return _array_leaf(node, arrays, where, error)
        raise error(f"{where}: unknown skeleton entry {str(node)[:200]}")

    return build(skeleton, 0)


def _array_leaf(node, arrays, where, error):
    name = node.get("name")
    if not isinstance(name, str) or name not in arrays:
        raise error(f"{where}: the file's skeleton names array {name!r}, which is missing "
                    "from the file")
    a = arrays[name]
    if "dtype" in node:               # raw bits of bfloat16 / float8
        tag = node["dtype"]
        if not (isinstance(tag, str) and tag in st.EXTRA_DTYPES):
            raise error(f"{where}: array {name!r} has an unknown dtype tag {tag!r}")
        bits = st.EXTRA_DTYPES[tag][1]
        if st.extra_dtype_name(a.dtype) is None:
            if a.dtype.newbyteorder("=") != bits.newbyteorder("="):
                raise error(f"{where}: array {name!r} tagged {tag} holds {a.dtype}, not the "
                            f"{bits} bits of one")
            a = st.from_bits(a, tag)
    if node.get("scalar"):
        if a.ndim:
            raise error(f"{where}: array {name!r} is marked a scalar but has shape {a.shape}")
        return a[()]
    return a


def _skeleton_text(skeleton):
    return json.dumps({"version": FORMAT_VERSION, "object": skeleton}, separators=(",", ":"))


def _parse_skeleton(text, where, error):
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        doc = json.loads(text)
        version, skeleton = doc["version"], doc["object"]
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise error(f"{where}: unreadable LeZero skeleton ({type(e).__name__}: {e})") from None
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise error(f"{where}: written in LeZero checkpoint format {version!r}; this "
                    f"LeZero reads up to format {FORMAT_VERSION}")
    return skeleton


def _storable(a):
    """The array as written: bfloat16/float8 as their raw bits."""
    return st.to_bits(a) if st.extra_dtype_name(a.dtype) else a


# ----- .npz -------------------------------------------------------------------------------
def _write_npz(f, skeleton, arrays):
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, a in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, _storable(a), allow_pickle=False)
        text = np.frombuffer(_skeleton_text(skeleton).encode("utf-8"), np.uint8)
        with zf.open(SKELETON + ".npy", "w") as member:
            np.lib.format.write_array(member, text, allow_pickle=False)


def _read_npz(path, max_inflation=None):
    """Through ``lezero.utils.npy`` (not ``np.load``): every member a ``.npy`` array of an
    allowed dtype whose header agrees with its byte count, read only after its declared
    size was charged to the inflation budget."""
    arrays = read_npz(path, max_inflation=max_inflation)
    if SKELETON not in arrays:                # a plain np.savez file
        return arrays
    text = arrays.pop(SKELETON)
    if text.dtype != np.uint8 or text.ndim != 1:
        raise NpzFormatError(f"{path}: the skeleton member is {text.dtype} {text.shape}, "
                             "not bytes")
    return unflatten(_parse_skeleton(text.tobytes(), path, NpzFormatError), arrays, path,
                     NpzFormatError)


# ----- HDF5 -------------------------------------------------------------------------------
def _write_h5(f, skeleton, arrays):
    h5py = hdf5.h5py_module()
    with h5py.File(f, "w") as h5:
        for name, a in arrays.items():
            h5.create_dataset(name, data=_storable(a))
        # fixed-length bytes, not a variable-length string: its size is declared up front
        h5.create_dataset(SKELETON, data=np.bytes_(_skeleton_text(skeleton).encode("utf-8")))


def _read_h5(path, max_inflation=None):
    """Through ``lezero.utils.hdf5``: hard links only, storage inside the file, built-in
    filters, numeric datasets, each charged to the inflation budget before it is read."""
    budget = ReadBudget(path, HDF5FormatError, max_inflation)     # checks it is a file
    h5 = hdf5.open_file(path)       # an unreadable path stays OSError, a non-HDF5 file not
    try:
        with h5:
            tree = hdf5.walk_tree(h5, path)
            if SKELETON not in tree:        # a foreign file: groups become dicts
                return hdf5.read_tree(tree, budget)
            text = _h5_skeleton(tree.pop(SKELETON), budget)
            arrays = hdf5.read_tree(tree, budget, flat=True)
    except FileFormatError:
        raise
    except hdf5.READ_ERRORS as e:
        raise HDF5FormatError(f"{path}: not a readable HDF5 file ({type(e).__name__}: "
                              f"{e})") from None
    return unflatten(_parse_skeleton(text, path, HDF5FormatError), arrays, path,
                     HDF5FormatError)


def _h5_skeleton(dset, budget):
    """The skeleton's text: fixed-length bytes (older files: a variable-length string)."""
    h5py = hdf5.h5py_module()
    if isinstance(dset, dict) or dset.shape != () or h5py.check_string_dtype(dset.dtype) is None:
        raise HDF5FormatError(f"{budget.where}: {SKELETON!r} is not a string dataset")
    hdf5.check_storage(dset, SKELETON, budget.where)
    budget.charge(dset.dtype.itemsize, f"dataset {SKELETON!r}")
    return dset[()]


# ----- safetensors ------------------------------------------------------------------------
def _is_flat_state_dict(skeleton):
    """True when the object is a plain {str: array} dict whose names need no escaping:
    then the file is a standard safetensors file with no LeZero metadata at all."""
    if not (isinstance(skeleton, dict) and skeleton.get("$") == "dict"):
        return False
    return all(isinstance(k, str) and isinstance(v, dict) and v == {"$": "array", "name": k}
               for k, v in skeleton["items"])


def _write_safetensors(f, skeleton, arrays):
    metadata = None if _is_flat_state_dict(skeleton) else {SKELETON: _skeleton_text(skeleton)}
    st.write(f, arrays, metadata)


def _read_safetensors(path, max_inflation=None):
    """Nothing in a safetensors file is compressed: the reader bounds it by its size."""
    tensors, metadata = st.load_file_with_metadata(path)
    if SKELETON not in metadata:
        return tensors
    return unflatten(_parse_skeleton(metadata[SKELETON], path, SafetensorsError), tensors,
                     path, SafetensorsError)


_WRITERS = {".npz": _write_npz, ".h5": _write_h5, ".hdf5": _write_h5,
            ".safetensors": _write_safetensors}
SAVE_EXTENSIONS = tuple(_WRITERS)      # what ``save`` writes: .npz, .h5, .hdf5, .safetensors
_READERS = {".npz": _read_npz, ".h5": _read_h5, ".hdf5": _read_h5,
            ".safetensors": _read_safetensors, ".pt": load_torch, ".pth": load_torch}


def _extension(path, table, verb):
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in table:
        known = ", ".join(sorted(table))
        extra = " (.pt/.pth files are read-only: save as .safetensors for PyTorch tools)" \
            if verb == "save" and ext in (".pt", ".pth") else ""
        raise ValueError(f"lz.{verb}: cannot tell the format of {os.fspath(path)!r} from its "
                         f"extension {ext or '(none)'!r}; use one of {known}{extra}")
    return table[ext]


def save(obj, path):
    """Save ``obj`` (nested dicts/lists/tuples of arrays, Variables, numbers, strings,
    None) to ``path``; the extension picks the format.  The write is atomic."""
    writer = _extension(path, _WRITERS, "save")
    skeleton, arrays = flatten(obj)        # fails on bad input before the disk is touched
    atomic_write(path, lambda f: writer(f, skeleton, arrays), where="lz.save")


def load(path, max_inflation=None):
    """Load what ``save`` wrote (or a PyTorch ``.pt``/``.pth`` file, a plain ``.npz``, an
    HDF5 or a safetensors file).  Arrays come back as NumPy arrays.

    A malformed or unsafe file raises the format's ``FileFormatError`` naming the file.
    Compressed data may expand to at most ``max_inflation`` (default
    ``lezero.utils.files.MAX_INFLATION``, 100) times the file's size; raise it for a
    trusted file that needs more."""
    reader = _extension(path, _READERS, "load")
    return reader(os.fspath(path), max_inflation)
