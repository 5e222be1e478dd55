"""The errors of ``lezero.data``'s file readers: one type per format.

Dataset files come from strangers (downloads, shared folders, caches), so a reader checks
every size, offset and shape a file declares before it maps, allocates or inflates
anything, and reports a file it refuses with its format's error, naming the file and
what is wrong.  All of them are ``ValueError``s (through ``FileFormatError``, the family
of every LeZero loader's errors); a few are also the type that code written before them
caught (``OSError`` for archives, ``pickle.UnpicklingError`` for CIFAR-10 batches,
``KeyError`` for a key the file lacks).

``.npy``, ``.npz`` and HDF5 files are read by the same readers as ``lz.load``
(``lezero.utils.npy`` and ``lezero.utils.hdf5``), so their errors are those readers'
types; the names below are aliases of them (``NpzFileError is NpzFormatError``).
"""
import pickle

from lezero.utils.files import FileFormatError
from lezero.utils.hdf5 import HDF5FormatError, HDF5KeyError
from lezero.utils.npy import NpyFormatError, NpzFormatError, NpzKeyError

__all__ = ["DataFileError", "RawFileError", "IdxFileError", "NpyFileError", "NpzFileError",
           "NpzKeyError", "HDF5FileError", "HDF5KeyError", "ImageFileError", "ArchiveError",
           "CIFARFileError"]

DataFileError = FileFormatError     # the family: every dataset file error is one
NpyFileError = NpyFormatError       # a .npy file: malformed, truncated or Python objects
NpzFileError = NpzFormatError       # an .npz archive or member (NpzKeyError: a missing key)
HDF5FileError = HDF5FormatError     # an HDF5 file (HDF5KeyError: a missing dataset)


class RawFileError(DataFileError):
    """A raw binary file (``MemmapDataset``) is too small for the declared shape."""


class IdxFileError(DataFileError):
    """An IDX file (MNIST's format, plain or gzip'd) is malformed or truncated."""


class ImageFileError(DataFileError):
    """An image file cannot be decoded or declares more pixels than allowed."""


class ArchiveError(DataFileError, OSError):
    """A tar archive is unreadable, too large, or has a member that is not a plain file or
    folder inside the destination."""


class CIFARFileError(DataFileError, pickle.UnpicklingError):
    """A CIFAR-10 batch file is not a batch, or its pickle names something not allowed."""
