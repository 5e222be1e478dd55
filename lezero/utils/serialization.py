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
"""
import json
import os
import zipfile

import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.utils import safetensors as st
from lezero.utils.files import atomic_write

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


def unflatten(skeleton, arrays, where="lz.load"):
    """Rebuild the object from ``flatten``'s skeleton and the arrays read back."""
    if isinstance(skeleton, list):
        return [unflatten(v, arrays, where) for v in skeleton]
    if not isinstance(skeleton, dict):
        return skeleton
    tag = skeleton.get("$")
    if tag == "dict":
        return {k: unflatten(v, arrays, where) for k, v in skeleton["items"]}
    if tag == "tuple":
        return tuple(unflatten(v, arrays, where) for v in skeleton["items"])
    if tag == "array":
        name = skeleton["name"]
        if name not in arrays:
            raise ValueError(f"{where}: the file's skeleton names array {name!r}, which is "
                             "missing from the file")
        a = arrays[name]
        if "dtype" in skeleton and st.extra_dtype_name(a.dtype) is None:
            a = st.from_bits(a, skeleton["dtype"])
        return a[()] if skeleton.get("scalar") else a
    raise ValueError(f"{where}: unknown skeleton entry {skeleton!r}")


def _skeleton_text(skeleton):
    return json.dumps({"version": FORMAT_VERSION, "object": skeleton}, separators=(",", ":"))


def _parse_skeleton(text, where):
    try:
        doc = json.loads(text)
        version, skeleton = doc["version"], doc["object"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{where}: unreadable LeZero skeleton ({e})") from None
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"{where}: written in LeZero checkpoint format {version!r}; this "
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


def _read_npz(path):
    with np.load(path, allow_pickle=False) as npz:
        if SKELETON not in npz.files:         # a plain np.savez file
            return {k: npz[k] for k in npz.files}
        skeleton = _parse_skeleton(npz[SKELETON].tobytes().decode("utf-8"), path)
        arrays = {k: npz[k] for k in npz.files if k != SKELETON}
    return unflatten(skeleton, arrays, path)


# ----- HDF5 -------------------------------------------------------------------------------
def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError("lz.save/lz.load: HDF5 files need h5py (a LeZero dependency): "
                          "pip install h5py") from None
    return h5py


def _write_h5(f, skeleton, arrays):
    h5py = _h5py()
    with h5py.File(f, "w") as h5:
        for name, a in arrays.items():
            h5.create_dataset(name, data=_storable(a))
        h5.create_dataset(SKELETON, data=_skeleton_text(skeleton))


def _read_h5(path):
    h5py = _h5py()
    with h5py.File(path, "r") as h5:
        if SKELETON not in h5:
            return _read_h5_group(h5, h5py)
        text = h5[SKELETON][()]
        skeleton = _parse_skeleton(text.decode("utf-8") if isinstance(text, bytes) else text,
                                   path)
        arrays = {}

        def collect(name, item):
            if isinstance(item, h5py.Dataset) and name != SKELETON:
                arrays[name] = np.asarray(item[()])     # scalars come back as 0-d arrays

        h5.visititems(collect)
    return unflatten(skeleton, arrays, path)


def _read_h5_group(group, h5py):
    """A foreign HDF5 file: groups become dicts, datasets arrays."""
    out = {}
    for name, item in group.items():
        if isinstance(item, h5py.Group):
            out[name] = _read_h5_group(item, h5py)
        else:
            out[name] = np.asarray(item[()])
    return out


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


def _read_safetensors(path):
    with open(path, "rb") as f:
        tensors, metadata = st.read(f, where=path)
    if SKELETON not in metadata:
        return tensors
    return unflatten(_parse_skeleton(metadata[SKELETON], path), tensors, path)


# ----- PyTorch --------------------------------------------------------------------------------
def _read_torch(path):
    from lezero.utils.torch_pickle import load_torch
    return load_torch(path)


_WRITERS = {".npz": _write_npz, ".h5": _write_h5, ".hdf5": _write_h5,
            ".safetensors": _write_safetensors}
_READERS = {".npz": _read_npz, ".h5": _read_h5, ".hdf5": _read_h5,
            ".safetensors": _read_safetensors, ".pt": _read_torch, ".pth": _read_torch}


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


def load(path):
    """Load what ``save`` wrote (or a PyTorch ``.pt``/``.pth`` file, a plain ``.npz``, an
    HDF5 or a safetensors file).  Arrays come back as NumPy arrays."""
    reader = _extension(path, _READERS, "load")
    return reader(os.fspath(path))
