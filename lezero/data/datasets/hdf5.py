"""``HDF5Dataset``: rows of an HDF5 dataset, read with h5py.

An HDF5 file can point outside itself and declare more than it holds, so the dataset is
reached and checked by ``lezero.utils.hdf5`` (the checks ``lz.load`` uses too) before a
byte is read: the key's path is followed link by link without leaving the file (external
links refused, soft links followed inside it), external storage, virtual datasets,
filters that are not built in and dtypes that are not plain numbers or fixed-width bytes
are refused, and the declared size (or one chunk, if larger) is charged to a
``ReadBudget``.  Problems raise ``HDF5FileError`` naming the file (``HDF5KeyError``, also
a ``KeyError``, for a key the file lacks).
"""
from lezero.data.datasets.errors import HDF5FileError
from lezero.data.datasets.storage import _FileDataset
from lezero.utils import hdf5
from lezero.utils.files import ReadBudget

__all__ = ["HDF5Dataset"]


class HDF5Dataset(_FileDataset):
    """Rows of dataset ``key`` (and ``target_key``) in an HDF5 file, read with h5py one
    sample or one sorted batch at a time; the file is opened per process.  The declared
    data (and the targets, read whole) may be at most ``max_inflation`` (default
    ``lezero.utils.files.MAX_INFLATION``) times the file's size."""

    error = HDF5FileError

    def __init__(self, path, key="data", target_key=None, transform=None,
                 target_transform=None, max_inflation=None):
        self.key, self.target_key = key, target_key
        self.max_inflation = max_inflation
        super().__init__(path, None, transform, target_transform)

    def _open(self):
        budget = ReadBudget(self.path, HDF5FileError, self.max_inflation)
        f = hdf5.open_file(self.path, who="HDF5Dataset: ")
        try:
            data = self._dataset(f, self.key, budget)
            targets = None
            if self.target_key is not None:
                targets = self._read(self._dataset(f, self.target_key, budget), ())
        except BaseException:
            f.close()
            raise
        self._file = f
        return data, targets

    def _dataset(self, f, key, budget):
        """The dataset at ``key``, reached without leaving the file, after the checks."""
        where = f"HDF5Dataset: {self.path}"
        try:
            dset = hdf5.resolve(f, key, where)
            hdf5.check_dataset(dset, key, where, budget)
        except HDF5FileError:
            raise
        except hdf5.READ_ERRORS as e:     # a corrupt B-tree, heap or object header
            raise HDF5FileError(f"{where}: cannot read {key!r} ({type(e).__name__}: "
                                f"{e})") from None
        return dset

    def _read(self, data, index):
        try:
            return data[index]
        except hdf5.READ_ERRORS as e:
            raise HDF5FileError(f"HDF5Dataset: cannot read {self.path} ({type(e).__name__}: "
                                f"{e})") from None

    def _read_rows(self, data, index):
        return self._read(data, index)     # h5py wants increasing indices: they are

    def _close(self):
        f = self.__dict__.pop("_file", None)
        if f is not None:
            f.close()

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_file", None)
        return state
