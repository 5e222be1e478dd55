"""``lz.load`` reads ``.npz`` and HDF5 files with the readers the datasets use
(``lezero.utils.npy``, ``lezero.utils.hdf5``) and gets the stricter of the two rules the
separate readers had.  Each test failed on the separate readers."""
import struct
import zipfile

import numpy as np
import pytest

import lezero as lz
from lezero.utils import serialization as ser


@pytest.mark.parametrize("descr", ["|S0", "<U0"])
def test_npz_members_of_zero_width_dtypes_are_the_format_error(descr, tmp_path):
    """A zero-width item made NumPy's ``view`` raise a bare ValueError without the file."""
    header = repr({"descr": descr, "fortran_order": False, "shape": (3,)}).encode()
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    with zipfile.ZipFile(tmp_path / "zero.npz", "w") as z:
        z.writestr("a.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
    with pytest.raises(ser.NpzFormatError, match=r"zero\.npz: member 'a\.npy': dtype "
                                                 r"\S+ is refused"):
        lz.load(tmp_path / "zero.npz")


def test_an_hdf5_chunk_is_charged_before_it_is_read(tmp_path):
    """One row of float64 stored in chunks of 800 MB: reading it decompresses a chunk."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "chunk.h5", "w") as f:
        f.create_dataset("c", shape=(1,), maxshape=(None,), chunks=(10 ** 8,), dtype="f8")
    with pytest.raises(ser.HDF5FormatError, match=r"chunk\.h5: one chunk of dataset 'c' "
                                                  r"\(shape \(1,\), chunks \(100000000,\)\) "
                                                  r"would expand to 800000000 bytes"):
        lz.load(tmp_path / "chunk.h5")
    with h5py.File(tmp_path / "small.h5", "w") as f:
        f.create_dataset("c", data=np.arange(10.0), chunks=(4,), compression="gzip")
    np.testing.assert_array_equal(lz.load(tmp_path / "small.h5")["c"], np.arange(10.0))
