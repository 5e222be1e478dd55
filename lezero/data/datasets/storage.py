"""Datasets over files: memory-mapped arrays, HDF5, ``.npz`` and image files.

Files are opened lazily in the process that reads them and never pickled: a worker
process (forked or spawned) opens its own handle, so a dataset over a 100 GB file costs a
file name to send to a worker, and reading a sample reads that sample's bytes only.
"""
import os

import numpy as np

from lezero.data.dataset import Dataset

__all__ = ["MemmapDataset", "NpyDataset", "NpzDataset", "HDF5Dataset", "ImageFolder",
           "load_image", "IMG_EXTENSIONS"]

IMG_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


class _FileDataset(Dataset):
    """Rows of an array that lives in a file.

    Subclasses define ``_open() -> (data, targets_or_None)``.  The handle is per process
    (re-opened after a fork, since HDF5 handles must not cross one) and dropped when
    pickled.  ``__getitems__`` reads a whole batch with one sorted fancy-index.
    """

    def __init__(self, path, targets=None, transform=None, target_transform=None):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"{type(self).__name__}: no such file {self.path!r}")
        self._targets = None if targets is None else np.asarray(targets)
        self.transform, self.target_transform = transform, target_transform
        self._handle, self._pid = None, None
        data, file_targets = self._open()
        self._length = len(data)
        targets = self._targets if self._targets is not None else file_targets
        self._close()       # open again where it is read (maybe in a forked worker)
        if targets is not None and len(targets) != self._length:
            raise ValueError(f"{type(self).__name__}: {self._length} samples but "
                             f"{len(targets)} targets")

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
        if not -self._length <= index < self._length:
            raise IndexError(f"{type(self).__name__}: index {index} out of range for "
                             f"{self._length} samples")
        data, targets = self._arrays()
        return self._sample(data[index], None if targets is None else targets[index])

    def __getitems__(self, indices):
        data, targets = self._arrays()
        idx = np.asarray(indices, dtype=np.int64)
        idx[idx < 0] += self._length
        if idx.size and (idx.min() < 0 or idx.max() >= self._length):
            raise IndexError(f"{type(self).__name__}: indices out of range for "
                             f"{self._length} samples")
        order = np.argsort(idx, kind="stable")
        uniq, inverse = np.unique(idx[order], return_inverse=True)
        rows = self._read_rows(data, uniq)
        picked = np.empty(len(idx), dtype=np.int64)
        picked[order] = inverse
        ys = None if targets is None else np.asarray(targets)[idx]
        return [self._sample(rows[p], None if ys is None else ys[k])
                for k, p in enumerate(picked)]

    def _read_rows(self, data, sorted_unique):
        return data[sorted_unique]

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_handle"], state["_pid"] = None, None
        return state


class MemmapDataset(_FileDataset):
    """Rows of a raw binary file read through ``np.memmap`` (``dtype``, ``shape``,
    ``offset`` as for ``np.memmap``); samples are ``x`` or ``(x, target)``."""

    def __init__(self, path, dtype, shape, offset=0, targets=None, transform=None,
                 target_transform=None):
        self.dtype, self.shape, self.offset = np.dtype(dtype), tuple(shape), int(offset)
        need = self.offset + int(np.prod(self.shape)) * self.dtype.itemsize
        if os.path.exists(path) and os.path.getsize(path) < need:
            raise ValueError(f"MemmapDataset: {path} has {os.path.getsize(path)} bytes, "
                             f"shape {self.shape} of {self.dtype} at offset {offset} needs "
                             f"{need}")
        super().__init__(path, targets, transform, target_transform)

    def _open(self):
        return np.memmap(self.path, self.dtype, "r", self.offset, self.shape), None


class NpyDataset(_FileDataset):
    """Rows of a ``.npy`` file opened with ``mmap_mode='r'``; ``targets`` may be an array
    or the path of another ``.npy`` file (also memory-mapped)."""

    def __init__(self, path, targets=None, transform=None, target_transform=None):
        self.targets_path = None
        if isinstance(targets, (str, os.PathLike)):
            self.targets_path, targets = os.fspath(targets), None
        super().__init__(path, targets, transform, target_transform)

    def _open(self):
        data = np.load(self.path, mmap_mode="r")
        targets = (np.load(self.targets_path, mmap_mode="r") if self.targets_path else None)
        return data, targets


class NpzDataset(_FileDataset):
    """Samples from arrays ``data_key`` (and ``target_key``) of an ``.npz`` archive.

    A compressed member cannot be memory-mapped: each process decompresses the arrays it
    reads once, on first access, and keeps them.
    """

    def __init__(self, path, data_key="x", target_key=None, transform=None,
                 target_transform=None):
        self.data_key, self.target_key = data_key, target_key
        with np.load(path) as z:
            missing = [k for k in (data_key, target_key) if k is not None and k not in z]
            if missing:
                raise KeyError(f"NpzDataset: {path} has no array {missing[0]!r}; it has "
                               f"{sorted(z.files)}")
        super().__init__(path, None, transform, target_transform)

    def _open(self):
        with np.load(self.path) as z:
            data = z[self.data_key]
            targets = z[self.target_key] if self.target_key is not None else None
        return data, targets


class HDF5Dataset(_FileDataset):
    """Rows of dataset ``key`` (and ``target_key``) in an HDF5 file, read with h5py one
    sample or one sorted batch at a time; the file is opened per process."""

    def __init__(self, path, key="data", target_key=None, transform=None,
                 target_transform=None):
        self.key, self.target_key = key, target_key
        super().__init__(path, None, transform, target_transform)

    def _open(self):
        import h5py
        f = h5py.File(self.path, "r")
        for k in (self.key, self.target_key):
            if k is not None and k not in f:
                keys = list(f.keys())
                f.close()
                raise KeyError(f"HDF5Dataset: {self.path} has no dataset {k!r}; it has "
                               f"{keys}")
        self._file = f
        targets = f[self.target_key][()] if self.target_key is not None else None
        return f[self.key], targets

    def _read_rows(self, data, sorted_unique):
        return data[sorted_unique]       # h5py wants increasing indices: they are

    def _close(self):
        f = self.__dict__.pop("_file", None)
        if f is not None:
            f.close()

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_file", None)
        return state


def load_image(path, mode="RGB"):
    """Decode an image file with Pillow into an ``(H, W, C)`` uint8 array (``(H, W)`` for
    mode "L")."""
    from PIL import Image
    with Image.open(path) as im:
        return np.asarray(im.convert(mode) if mode else im)


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
            for dirpath, _, files in sorted(os.walk(folder, followlinks=True)):
                for name in sorted(files):
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
