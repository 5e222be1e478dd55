"""Datasets over files: memory-mapped arrays, ``.npy``, ``.npz`` and image files (HDF5 in
``hdf5.py``).

Files are opened lazily in the process that reads them and never pickled: a worker
process (forked or spawned) opens its own handle, so a dataset over a 100 GB file costs a
file name to send to a worker, and reading a sample reads that sample's bytes only.

Files may come from strangers: the readers check what a file declares against what it
holds before mapping or inflating anything, and raise their format's error (see
``errors.py``) naming the file.  ``.npy``/``.npz`` files go through ``lezero.utils.npy``,
the reader ``lz.load`` uses too.
"""
import operator
import os

import numpy as np

from lezero.data.dataset import Dataset
from lezero.data.datasets.errors import (DataFileError, ImageFileError, NpyFileError,
                                         NpzFileError, RawFileError)
from lezero.utils.files import check_regular_file
from lezero.utils.npy import open_npy, read_npz

__all__ = ["MemmapDataset", "NpyDataset", "NpzDataset", "ImageFolder", "load_image",
           "IMG_EXTENSIONS"]

IMG_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


class _FileDataset(Dataset):
    """Rows of an array that lives in a file.

    Subclasses define ``_open() -> (data, targets_or_None)``.  The handle is per process
    (re-opened after a fork, since HDF5 handles must not cross one) and dropped when
    pickled.  ``__getitems__`` reads a whole batch with one sorted fancy-index.
    """

    error = DataFileError           # the format's error type (subclasses narrow it)

    def __init__(self, path, targets=None, transform=None, target_transform=None):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"{type(self).__name__}: no such file {self.path!r}")
        self._targets = None if targets is None else np.asarray(targets)
        self.transform, self.target_transform = transform, target_transform
        self._handle, self._pid = None, None
        data, file_targets = self._open()
        targets = self._targets if self._targets is not None else file_targets
        try:
            self._length = self._check_shapes(data, targets)
        finally:
            self._close()   # open again where it is read (maybe in a forked worker)

    def _check_shapes(self, data, targets):
        """The number of samples, after checking that data and targets have a sample
        axis and one length, and that the file is not an empty shell declaring more
        samples than it has bytes (a sampler would allocate per sample)."""
        name = type(self).__name__
        for what, a in (("data", data), ("targets", targets)):
            if a is not None and len(a.shape) == 0:
                raise self.error(f"{name}: the {what} of {self.path} is a scalar (shape ()); "
                                 f"a dataset needs a leading sample axis")
        length = data.shape[0]
        if length > max(1, os.path.getsize(self.path)):
            raise self.error(f"{name}: {self.path} declares {length} samples in "
                             f"{os.path.getsize(self.path)} bytes")
        if targets is not None and len(targets) != length:
            raise ValueError(f"{name}: {length} samples but {len(targets)} targets")
        return length

    def _open(self):
        raise NotImplementedError

    def _close(self):
        """Release what ``_open`` holds beyond the arrays (an HDF5 file handle)."""

    def _arrays(self):
        if self._handle is None or self._pid != os.getpid():
            self._handle, self._pid = self._open(), os.getpid()
        data, file_targets = self._handle
        return data, (self._targets if self._targets is not None else file_targets)

    @property
    def data(self):
        """The (file-backed) array of samples."""
        return self._arrays()[0]

    @property
    def targets(self):
        return self._arrays()[1]

    def __len__(self):
        return self._length

    def _sample(self, x, y):
        x = np.array(x)      # a copy: a sample must not pin the file mapping
        if self.transform is not None:
            x = self.transform(x)
        if y is None:
            return x
        y = y.item() if isinstance(y, np.generic) or getattr(y, "ndim", 1) == 0 else y
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y

    def __getitem__(self, index):
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(f"{type(self).__name__}: index must be an integer, got "
                            f"{type(index).__name__}") from None
        if not -self._length <= index < self._length:
            raise IndexError(f"{type(self).__name__}: index {index} out of range for "
                             f"{self._length} samples")
        data, targets = self._arrays()
        return self._sample(self._read_rows(data, index),
                            None if targets is None else targets[index])

    def __getitems__(self, indices):
        data, targets = self._arrays()
        idx = self._check_indices(indices)
        order = np.argsort(idx, kind="stable")
        uniq, inverse = np.unique(idx[order], return_inverse=True)
        rows = self._read_rows(data, uniq)
        picked = np.empty(len(idx), dtype=np.int64)
        picked[order] = inverse
        ys = None if targets is None else np.asarray(targets)[idx]
        return [self._sample(rows[p], None if ys is None else ys[k])
                for k, p in enumerate(picked)]

    def _check_indices(self, indices):
        """``indices`` as int64 in ``[0, len)``; TypeError for non-integers, IndexError
        for any out of range (checked before a cast could wrap a huge one)."""
        name, n = type(self).__name__, self._length
        idx = np.asarray(indices)
        if idx.size == 0:
            return np.zeros(0, np.int64)
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise TypeError(f"{name}: indices must be a flat sequence of integers that fit "
                            f"in int64, got {idx.dtype} of shape {idx.shape}")
        if idx.max() >= n or (idx.dtype.kind == "i" and idx.min() < -n):
            raise IndexError(f"{name}: indices out of range for {n} samples (min "
                             f"{idx.min()}, max {idx.max()})")
        idx = idx.astype(np.int64)
        idx[idx < 0] += n
        return idx

    def _read_rows(self, data, index):
        """Row ``index`` (an int) or rows ``index`` (sorted unique int64) of ``data``."""
        return data[index]

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_handle"], state["_pid"] = None, None
        return state


class MemmapDataset(_FileDataset):
    """Rows of a raw binary file read through ``np.memmap`` (``dtype``, ``shape``,
    ``offset`` as for ``np.memmap``); samples are ``x`` or ``(x, target)``."""

    error = RawFileError

    def __init__(self, path, dtype, shape, offset=0, targets=None, transform=None,
                 target_transform=None):
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject or self.dtype.itemsize == 0:
            raise TypeError(f"MemmapDataset: dtype {self.dtype} cannot be read from raw "
                            f"bytes (Python objects, or zero bytes per item)")
        try:
            dims = shape if isinstance(shape, (tuple, list)) else (shape,)
            self.shape = tuple(operator.index(n) for n in dims)
            self.offset = operator.index(offset)
        except TypeError:
            raise TypeError(f"MemmapDataset: shape must be integers and offset an integer, "
                            f"got shape {shape!r}, offset {offset!r}") from None
        if not self.shape or min(self.shape) < 0 or self.offset < 0:
            raise ValueError(f"MemmapDataset: shape must be non-negative integers with a "
                             f"sample axis and offset >= 0, got shape {shape!r}, offset "
                             f"{offset!r}")
        need = self.offset + int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize
        if os.path.exists(path) and os.path.getsize(path) < need:
            raise RawFileError(f"MemmapDataset: {path} has {os.path.getsize(path)} bytes, "
                               f"shape {self.shape} of {self.dtype} at offset {offset} "
                               f"needs {need}")
        super().__init__(path, targets, transform, target_transform)

    def _open(self):
        if 0 in self.shape:             # an empty region cannot be mapped
            return np.zeros(self.shape, self.dtype), None
        return np.memmap(self.path, self.dtype, "r", self.offset, self.shape), None


class NpyDataset(_FileDataset):
    """Rows of a ``.npy`` file, memory-mapped read-only; ``targets`` may be an array or
    the path of another ``.npy`` file (also memory-mapped).  Object arrays and files
    shorter than their header declares raise ``NpyFileError``."""

    error = NpyFileError

    def __init__(self, path, targets=None, transform=None, target_transform=None):
        self.targets_path = None
        if isinstance(targets, (str, os.PathLike)):
            self.targets_path, targets = os.fspath(targets), None
        super().__init__(path, targets, transform, target_transform)

    def _open(self):
        data = open_npy(self.path, "NpyDataset")
        targets = open_npy(self.targets_path, "NpyDataset") if self.targets_path else None
        return data, targets


class NpzDataset(_FileDataset):
    """Samples from arrays ``data_key`` (and ``target_key``) of an ``.npz`` archive.

    A compressed member cannot be memory-mapped: each process decompresses the arrays it
    reads once, on first access, and keeps them.  Members may inflate to at most
    ``max_inflation`` (default ``lezero.utils.files.MAX_INFLATION``) times the archive's
    size; anything malformed raises ``NpzFileError`` (``NpzKeyError``, also a ``KeyError``,
    for a missing key).
    """

    error = NpzFileError

    def __init__(self, path, data_key="x", target_key=None, transform=None,
                 target_transform=None, max_inflation=None):
        self.data_key, self.target_key = data_key, target_key
        self.max_inflation = max_inflation
        super().__init__(path, None, transform, target_transform)

    def _open(self):
        keys = [k for k in (self.data_key, self.target_key) if k is not None]
        arrays = read_npz(self.path, keys, self.max_inflation, who="NpzDataset: ",
                          label="member {}")
        return arrays[self.data_key], arrays.get(self.target_key)


def load_image(path, mode="RGB"):
    """Decode an image file with Pillow into an ``(H, W, C)`` uint8 array (``(H, W)`` for
    mode "L").

    A path that is not a regular file, a file Pillow cannot decode, or one declaring more
    than ``PIL.Image.MAX_IMAGE_PIXELS``
    pixels (checked from the header, before decoding; Pillow itself only warns up to
    twice that), raises ``ImageFileError`` naming the file."""
    from PIL import Image
    check_regular_file(path, ImageFileError)     # Pillow would wait on a pipe forever
    try:
        with Image.open(path) as im:
            limit = Image.MAX_IMAGE_PIXELS
            if limit is not None and im.size[0] * im.size[1] > limit:
                raise ImageFileError(f"load_image: {path} declares {im.size[0]}x{im.size[1]}"
                                     f" pixels, more than PIL.Image.MAX_IMAGE_PIXELS="
                                     f"{limit} (a decompression bomb?)")
            return np.asarray(im.convert(mode) if mode else im)
    except (ImageFileError, FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as e:     # decoders raise many types on corrupt data: one error here
        raise ImageFileError(f"load_image: cannot decode {path} ({type(e).__name__}: "
                             f"{e})") from None


def _walk_once(folder):
    """``os.walk(folder, followlinks=True)`` in sorted order, entering each real folder
    once: a symbolic link back up the tree would otherwise make the walk endless."""
    seen, found = set(), []
    for dirpath, dirnames, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames.sort()
        found.append((dirpath, sorted(files)))
    return sorted(found)


class ImageFolder(Dataset):
    """Images in ``root/<class name>/<file>``, decoded when read (so in the workers).

    ``classes`` (sorted folder names), ``class_to_idx``, ``samples`` (path, class index)
    and ``targets`` as in torchvision.  A sample is ``(image, class index)``.
    """

    def __init__(self, root, transform=None, target_transform=None, loader=load_image,
                 extensions=IMG_EXTENSIONS):
        self.root = os.fspath(root)
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"ImageFolder: no such folder {self.root!r}")
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        if not self.classes:
            raise FileNotFoundError(f"ImageFolder: {self.root!r} has no class folders")
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        exts = tuple(e.lower() for e in extensions)
        self.samples = []
        for c in self.classes:
            folder = os.path.join(self.root, c)
            for dirpath, files in _walk_once(folder):
                for name in files:
                    if name.lower().endswith(exts):
                        self.samples.append((os.path.join(dirpath, name), self.class_to_idx[c]))
        if not self.samples:
            raise FileNotFoundError(f"ImageFolder: no files with extensions {exts} under "
                                    f"{self.root!r}")
        self.targets = [t for _, t in self.samples]
        self.loader, self.transform, self.target_transform = loader, transform, target_transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        x = self.loader(path)
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return x, target
