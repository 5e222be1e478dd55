"""Reading HDF5 files that may come from strangers: the one set of checks behind ``lz.load``
(``.h5``/``.hdf5``) and ``HDF5Dataset``.

An HDF5 file can point outside itself and ask for more than it holds: external links open
another file, external storage and virtual datasets return the bytes of other files (any
local file the attacker names), a filter id that is not built in makes HDF5 load a plugin
(code) from its plugin folder, and a tiny file can declare terabytes of fill values or
chunks of gigabytes.  So:

* ``walk_tree`` (``lz.load``: every object) follows hard links only, each object once;
  ``resolve`` (``HDF5Dataset``: one key) follows hard links and soft links inside the file,
  spelling each soft link out itself, so HDF5 never opens the file of an external link;
* ``check_dataset`` refuses external and virtual storage, filters that are not built in,
  and dtypes that are not plain numbers or fixed-width bytes, and charges the declared
  size (or one chunk, if larger) to a ``ReadBudget`` before a byte is read.

Problems raise ``HDF5FormatError`` naming the file (``HDF5KeyError``, also a ``KeyError``,
for a key the file lacks).  h5py is imported only when a file is opened.
"""
import math

import numpy as np

from lezero.utils.files import (MAX_DEPTH, FileFormatError, MissingKeyError,
                                check_regular_file)
from lezero.utils.safetensors import check_shape, numeric_dtype

__all__ = ["HDF5FormatError", "HDF5KeyError", "READ_ERRORS", "BUILTIN_FILTERS", "h5py_module",
           "open_file", "walk_tree", "resolve", "check_storage", "check_dataset",
           "read_tree"]

# What h5py raises on a corrupt file, a missing filter or an unreadable chunk.
READ_ERRORS = (OSError, RuntimeError, ValueError, TypeError, KeyError, AttributeError)
# Filters that ship with HDF5 / h5py: gzip, shuffle, fletcher32, szip, nbit, scale-offset,
# lzf.  Any other id would make HDF5 search its plugin folder for code.
BUILTIN_FILTERS = frozenset({1, 2, 3, 4, 5, 6, 32000})
MAX_SOFT_LINKS = 16          # soft links one key may go through (HDF5's own default)


class HDF5FormatError(FileFormatError):
    """An HDF5 file is malformed, or reaches outside itself (links, external storage)."""


class HDF5KeyError(HDF5FormatError, MissingKeyError):
    """An HDF5 file lacks the dataset the caller named."""


def h5py_module():
    """``h5py``, or an ImportError that says how to install it."""
    try:
        import h5py
    except ImportError:
        raise ImportError("HDF5 files need h5py (a LeZero dependency): pip install h5py") \
            from None
    return h5py


def open_file(path, who=""):
    """``h5py.File(path, "r")`` of a regular file (a pipe would block HDF5); a file HDF5
    cannot open raises ``HDF5FormatError``.  ``who`` prefixes the message."""
    h5py = h5py_module()
    check_regular_file(path, HDF5FormatError)
    open(path, "rb").close()            # an unreadable file is the usual OSError
    try:
        return h5py.File(path, "r")
    except READ_ERRORS as e:
        raise HDF5FormatError(f"{who}{path} is not a readable HDF5 file "
                              f"({type(e).__name__}: {e})") from None


def walk_tree(group, where, seen=None, depth=0):
    """The group as nested dicts of (unread) datasets.  Only hard links are followed,
    each object once: soft, external and user-defined links are refused, and so are
    objects linked twice (a cycle, or exponential re-reading)."""
    h5py = h5py_module()
    seen = set() if seen is None else seen
    if depth > MAX_DEPTH:
        raise HDF5FormatError(f"{where}: groups nested deeper than {MAX_DEPTH} levels")
    out = {}
    for name in group:                    # link names: nothing is resolved yet
        path = f"{group.name.rstrip('/')}/{name}"
        link = group.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise HDF5FormatError(f"{where}: {path!r} is not a hard link but a "
                                  f"{type(link).__name__}; only objects stored in the file "
                                  "itself are read")
        item = group[name]
        if item.id in seen:
            raise HDF5FormatError(f"{where}: {path!r} links to an object reached before "
                                  "(shared or cyclic links are not read)")
        seen.add(item.id)
        if isinstance(item, h5py.Group):
            out[name] = walk_tree(item, where, seen, depth + 1)
        elif isinstance(item, h5py.Dataset):
            out[name] = item
        else:
            raise HDF5FormatError(f"{where}: {path!r} is a {type(item).__name__}, not a "
                                  "group or dataset")
    return out


def _parts(path):
    return [p for p in str(path).split("/") if p and p != "."]


def resolve(f, key, where):
    """The dataset at ``key`` of the open file ``f``, reached link by link without leaving
    the file: hard links, and soft links whose path is followed here (at most
    ``MAX_SOFT_LINKS``); an external link anywhere on the way is refused before HDF5
    could open its file."""
    h5py = h5py_module()
    node, parts, soft = f, _parts(key), []
    if not parts:
        raise HDF5KeyError(f"{where} has no dataset {key!r}; it has {list(f.keys())}")
    while parts:
        part = parts.pop(0)
        link = node.get(part, getlink=True) if isinstance(node, h5py.Group) else None
        if link is None:
            raise HDF5KeyError(f"{where} has no dataset {key!r}; it has {list(f.keys())}")
        if isinstance(link, h5py.SoftLink):
            if len(soft) == MAX_SOFT_LINKS:
                raise HDF5FormatError(f"{where}: {key!r} goes through more than "
                                      f"{MAX_SOFT_LINKS} soft links ({soft[:4]}...); refused")
            soft.append(link.path)
            node = f if link.path.startswith("/") else node
            parts = _parts(link.path) + parts
        elif isinstance(link, h5py.ExternalLink) and soft:
            raise HDF5FormatError(f"{where}: {key!r} leads to another file "
                                  f"({link.filename!r}) through the soft links {soft}; "
                                  "refused")
        elif isinstance(link, h5py.ExternalLink):
            raise HDF5FormatError(f"{where}: {key!r} goes through an external link to "
                                  f"{link.filename!r}; refused")
        elif not isinstance(link, h5py.HardLink):
            raise HDF5FormatError(f"{where}: {key!r} goes through a {type(link).__name__} "
                                  f"(soft links: {soft}); refused")
        else:
            node = node[part]
    if not isinstance(node, h5py.Dataset):
        raise HDF5FormatError(f"{where}: {key!r} is a {type(node).__name__}, not a dataset")
    return node


def check_storage(dset, key, where):
    """Refuse a dataset whose bytes live outside the file or need a filter plugin."""
    if dset.is_virtual:
        raise HDF5FormatError(f"{where}: {key!r} is a virtual dataset ({dset.name!r} uses "
                              "virtual storage: its data lives in other files); refused")
    if dset.external:
        raise HDF5FormatError(f"{where}: {key!r} keeps its data in external files "
                              f"{[e[0] for e in dset.external]} ({dset.name!r} uses external "
                              "storage); refused")
    plist = dset.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        code = plist.get_filter(i)[0]
        if code not in BUILTIN_FILTERS:
            raise HDF5FormatError(f"{where}: dataset {key!r} needs HDF5 filter {code}, "
                                  "which is not built in (HDF5 would load a plugin); refused")


def check_dataset(dset, key, where, budget):
    """``check_storage``; then only plain numbers or fixed-width bytes of a valid shape;
    then charge ``budget`` with the declared bytes, or one chunk's if that is larger
    (a chunk is decompressed whole, even to read one row)."""
    check_storage(dset, key, where)
    if dset.shape is None or not numeric_dtype(dset.dtype, also="S"):
        raise HDF5FormatError(f"{where}: dataset {key!r} has dtype {dset.dtype} and shape "
                              f"{dset.shape}; only numeric arrays are loaded")
    shape = check_shape(list(dset.shape), where, f"dataset {key!r}", HDF5FormatError)
    nbytes = math.prod(shape) * dset.dtype.itemsize
    chunk = math.prod(dset.chunks) * dset.dtype.itemsize if dset.chunks else 0
    what = f"dataset {key!r} (shape {shape}, chunks {dset.chunks})"
    if chunk > nbytes:
        budget.charge(chunk, f"one chunk of {what}")
    else:
        budget.charge(nbytes, f"{what} at {dset.name!r}")


def read_tree(tree, budget, flat=False, prefix=""):
    """Read every dataset of ``walk_tree``'s ``tree`` (each checked and charged first) as
    nested dicts of arrays, or (``flat``) as one dict keyed by path."""
    out = {}
    for name, item in tree.items():
        if isinstance(item, dict) and flat:
            out.update(read_tree(item, budget, flat, f"{prefix}{name}/"))
        elif isinstance(item, dict):
            out[name] = read_tree(item, budget, flat, f"{prefix}{name}/")
        else:
            check_dataset(item, prefix + name, budget.where, budget)
            out[prefix + name if flat else name] = np.asarray(item[()])   # 0-d, not scalars
    return out
