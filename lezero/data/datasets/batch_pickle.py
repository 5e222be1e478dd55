"""Reading CIFAR-10's batch files (pickles) without trusting them.

A batch is a pickled dict of a uint8 array and lists of ints and bytes, written by
Python 2 (read with ``encoding="bytes"``).  The file is read whole into memory (a length
field cannot make a read allocate more than the file) and unpickled by
``lezero.utils.numpy_pickle``'s restricted unpickler, the one ``.pt`` files go through:
only NumPy's own constructors are allowed, each taking only what NumPy writes (plain
numeric dtypes whose BUILD sets nothing but a byte order, empty placeholder arrays that
BUILD fills with exactly the bytes their shape needs, latin-1 text).  Anything else
raises ``CIFARFileError`` naming the file.
"""
import io
import pickle
import struct

from lezero.data.datasets.errors import CIFARFileError
from lezero.utils.files import check_regular_file
from lezero.utils.numpy_pickle import RestrictedUnpickler, plain

__all__ = ["load_batch"]

# what a malformed pickle makes the unpickler raise
_MALFORMED = (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
              AttributeError, OverflowError, MemoryError, RecursionError, struct.error)


def load_batch(path):
    """The dict of a CIFAR batch file (keys as bytes: ``b"data"``, ``b"labels"``...)."""
    check_regular_file(path, CIFARFileError)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        unpickler = RestrictedUnpickler(io.BytesIO(raw), "the pickle", encoding="bytes")
        batch = plain(unpickler.load(), "the pickle", pickle.UnpicklingError)
    except _MALFORMED as e:
        raise CIFARFileError(f"CIFAR10: {path} is not a CIFAR-10 batch "
                             f"({type(e).__name__}: {e})") from None
    if not isinstance(batch, dict):
        raise CIFARFileError(f"CIFAR10: {path} holds a {type(batch).__name__}, not a "
                             f"batch dict")
    return batch
