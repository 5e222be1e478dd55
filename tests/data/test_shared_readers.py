"""The dataset readers share ``lz.load``'s reader per format (``lezero.utils.npy``,
``hdf5``, ``numpy_pickle``): one error type per format, and each dataset now gets the
stricter of the two rules the readers had (issue 32 follow-up).  Each test failed on the
two separate readers."""
import os
import pickle
import struct
import subprocess
import sys
import threading
import tracemalloc
import zipfile

import numpy as np
import pytest

import lezero as lz
from lezero.data.datasets import (CIFAR10, ArchiveError, CIFARFileError, HDF5Dataset,
                                  HDF5FileError, HDF5KeyError, IdxFileError, ImageFileError,
                                  NpyDataset, NpyFileError, NpzDataset, NpzFileError,
                                  NpzKeyError, extract_tar, load_image, read_idx)
from lezero.data.datasets.batch_pickle import load_batch
from lezero.utils import hdf5, npy, serialization

pytestmark = pytest.mark.timeout(60)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_one_error_type_per_format_whichever_reader_raises_it(tmp_path):
    assert NpzFileError is serialization.NpzFormatError is npy.NpzFormatError
    assert HDF5FileError is serialization.HDF5FormatError is hdf5.HDF5FormatError
    assert NpyFileError is npy.NpyFormatError
    for key_error, base in ((NpzKeyError, NpzFileError), (HDF5KeyError, HDF5FileError)):
        assert issubclass(key_error, base) and issubclass(key_error, KeyError)
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive")
    with pytest.raises(NpzFileError, match=r"junk\.npz is not a readable \.npz archive"):
        lz.load(tmp_path / "junk.npz")          # lz.load's error is the dataset's error
    with pytest.raises(NpzFileError, match=r"NpzDataset: .*junk\.npz is not a readable"):
        NpzDataset(tmp_path / "junk.npz", "x")


# ----- pipes: refused, never waited on -----------------------------------------------------
class _Pipe(str):
    """A pipe's path; ``released`` tells whether a reader had to be released from it."""


@pytest.fixture
def fifo(tmp_path):
    """A named pipe.  A helper opens its writing end whenever a reader waits on it (which
    a reader must never do), so a wrong reader is released and the test fails on
    ``released`` instead of hanging."""
    path = _Pipe(tmp_path / "pipe")
    os.mkfifo(path)
    path.released, done = False, threading.Event()

    def release():
        while not done.wait(0.1):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                path.released = True
            except OSError:
                continue          # nobody is waiting

    threading.Thread(target=release, daemon=True).start()
    yield path
    done.set()


def _hdf5_dataset_error(path, key):
    """``HDF5Dataset(path, key)``'s error as "Type: message", from a child process: h5py
    holds the GIL while HDF5 waits on a pipe, so only a process can be timed out."""
    code = ("import sys\nfrom lezero.data.datasets import HDF5Dataset\ntry:\n"
            "    HDF5Dataset(sys.argv[1], sys.argv[2])\nexcept Exception as e:\n"
            "    print(f'{type(e).__name__}: {e}')\n")
    done = subprocess.run([sys.executable, "-c", code, str(path), key], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


@pytest.mark.parametrize("read,error", [
    (NpyDataset, NpyFileError),
    (lambda p: NpzDataset(p, "x"), NpzFileError),
    (read_idx, IdxFileError),
    (load_batch, CIFARFileError),
    (load_image, ImageFileError),
    (lambda p: extract_tar(p, os.path.dirname(p) + "/out"), ArchiveError),
])
def test_dataset_readers_refuse_a_pipe_instead_of_waiting_on_it(read, error, fifo):
    with pytest.raises(error, match=r"pipe: not a regular file"):
        read(fifo)
    assert not fifo.released


def test_hdf5_dataset_refuses_a_pipe_instead_of_waiting_on_it(fifo):
    message = _hdf5_dataset_error(fifo, "x")
    assert message.startswith("HDF5FormatError: ") and message.endswith(
        "pipe: not a regular file (a pipe, socket or device)"), message


# ----- HDF5: the stricter of the two walks ---------------------------------------------------
h5py = pytest.importorskip("h5py")


def test_hdf5_dataset_refuses_a_filter_plugin(tmp_path):
    """HDF5 would search its plugin folder for code implementing filter 32004."""
    with h5py.File(tmp_path / "filter.h5", "w") as f:
        f.create_dataset("x", shape=(8,), dtype="f4", chunks=(4,), compression=32004,
                         allow_unknown_filter=True)
    with pytest.raises(HDF5FileError, match=r"filter\.h5: dataset 'x' needs HDF5 filter "
                                            r"32004, which is not built in"):
        HDF5Dataset(tmp_path / "filter.h5", "x")


def test_hdf5_soft_link_through_an_external_link_never_opens_the_other_file(tmp_path, fifo):
    """h5py resolved the soft link itself, opening the external link's file (here a pipe,
    which blocked it) before the dataset was checked."""
    with h5py.File(tmp_path / "links.h5", "w") as f:
        f["inside"] = np.arange(4)
        f["ext"] = h5py.ExternalLink(str(fifo), "/grp")
        f["soft"] = h5py.SoftLink("/ext/data")
        f["rel"] = h5py.SoftLink("inside")
        f["loop"] = h5py.SoftLink("/loop")
    message = _hdf5_dataset_error(tmp_path / "links.h5", "soft")
    assert message.startswith("HDF5FormatError: HDF5Dataset: ") and message.endswith(
        f"links.h5: 'soft' leads to another file ('{fifo}') through the soft links "
        "['/ext/data']; refused"), message
    assert HDF5Dataset(tmp_path / "links.h5", "rel")[2] == 2      # relative, in the file
    with pytest.raises(HDF5FileError, match=r"'loop' goes through more than 16 soft links"):
        HDF5Dataset(tmp_path / "links.h5", "loop")
    assert not fifo.released


def test_hdf5_dataset_reads_only_numbers_like_lz_load(tmp_path):
    with h5py.File(tmp_path / "rec.h5", "w") as f:
        f["rec"] = np.zeros(4, [("a", "f4"), ("b", "i2")])
        f["ok"] = np.arange(4.0)
    with pytest.raises(HDF5FileError, match=r"dataset 'rec' has dtype .*; only numeric "
                                            r"arrays are loaded"):
        HDF5Dataset(tmp_path / "rec.h5", "rec")
    assert HDF5Dataset(tmp_path / "rec.h5", "ok")[3] == 3.0


# ----- .npy / .npz: the stricter of the two parsers ------------------------------------------
def _npy(header, body=b"", version=1):
    text = repr(header).encode("latin1") if isinstance(header, dict) else header
    field = "<H" if version == 1 else "<I"
    text += b" " * (-(8 + struct.calcsize(field) + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(field, len(text)) + text + body


def test_npz_dataset_members_must_hold_exactly_their_array(tmp_path):
    header = {"descr": "<f4", "fortran_order": False, "shape": (2,)}
    with zipfile.ZipFile(tmp_path / "extra.npz", "w") as z:
        z.writestr("x.npy", _npy(header, b"\0" * 8 + b"trailing"))
    with pytest.raises(NpzFileError, match=r"member x\.npy: the header declares shape "
                                           r"\(2,\) of float32, which needs 8 bytes, the "
                                           r"member has 16"):
        NpzDataset(tmp_path / "extra.npz", "x")
    with zipfile.ZipFile(tmp_path / "other.npz", "w") as z:
        z.writestr("x.npy", _npy(header, b"\0" * 8))
        z.writestr("run.sh", b"echo hi")
    with pytest.raises(NpzFileError, match=r"member run\.sh is not a \.npy array"):
        NpzDataset(tmp_path / "other.npz", "x")


def test_npz_dataset_arrays_are_aligned(tmp_path):
    header = repr({"descr": "<f8", "fortran_order": False, "shape": (3,)}).encode() + b"  \n"
    raw = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header      # odd offset
    with zipfile.ZipFile(tmp_path / "odd.npz", "w") as z:
        z.writestr("x.npy", raw + np.arange(3.0).tobytes())
    assert (10 + len(header)) % 8
    data = NpzDataset(tmp_path / "odd.npz", "x").data
    assert data.flags.aligned and data.tolist() == [0.0, 1.0, 2.0]


def test_npy_dataset_header_rules(tmp_path):
    (tmp_path / "py2.npy").write_bytes(
        _npy(b"{'descr': '<i4', 'fortran_order': False, 'shape': (3L,), }",
             np.arange(3, dtype="<i4").tobytes()))
    assert NpyDataset(tmp_path / "py2.npy")[2] == 2          # what Python 2 NumPy wrote
    (tmp_path / "rec.npy").write_bytes(
        _npy({"descr": [("a", "<f4")], "fortran_order": False, "shape": (2,)}, b"\0" * 8))
    (tmp_path / "trailing.npy").write_bytes(_npy({"descr": "<f4", "fortran_order": False,
                                              "shape": (2,)}, b"\0" * 12))
    with pytest.raises(NpyFileError, match=r"trailing\.npy: the header declares shape \(2,\) of "
                                           r"float32, which needs 8 bytes, the file has 12"):
        NpyDataset(tmp_path / "trailing.npy")
    with pytest.raises(NpyFileError, match=r"rec\.npy: dtype .* is refused"):
        NpyDataset(tmp_path / "rec.npy")
    (tmp_path / "v3.npy").write_bytes(_npy({"descr": "<f4", "fortran_order": False,
                                            "shape": (2,)}, b"\0" * 8, version=3))
    with pytest.raises(NpyFileError, match=r"v3\.npy: bad \.npy header: unsupported \.npy "
                                           r"format version 3\.0"):
        NpyDataset(tmp_path / "v3.npy")
    long_header = {"descr": "<f4", "fortran_order": False, "shape": (2,), "x": " " * 20000}
    (tmp_path / "wide.npy").write_bytes(_npy(long_header, b"\0" * 8, version=2))
    with pytest.raises(NpyFileError, match=r"wide\.npy: \.npy header length \d+ is past "
                                           r"the end of the data or over 10000 bytes"):
        NpyDataset(tmp_path / "wide.npy")


# ----- CIFAR-10 batches: the restricted unpickler of .pt files --------------------------------
class _Py2Pickler(pickle._Pickler):
    """Writes ``bytes`` as Python 2 wrote its ``str`` (SHORT_BINSTRING / BINSTRING), so a
    batch reads back as CIFAR-10's real files do, with ``encoding="bytes"``."""

    dispatch = dict(pickle._Pickler.dispatch)

    def _save_py2_str(self, obj):
        size = len(obj)
        self.write(pickle.SHORT_BINSTRING + bytes([size]) + obj if size < 256 else
                   pickle.BINSTRING + struct.pack("<i", size) + obj)
        self.memoize(obj)

    dispatch[bytes] = _save_py2_str


class _Reduce:
    def __init__(self, fn, args, state):
        self.value = (fn, args, state)

    def __reduce__(self):
        return self.value


def _py2_array(array, dtype):
    """NumPy's pickle of ``array`` with Python 2 strings, on the shared ``dtype`` object."""
    from numpy._core.multiarray import _reconstruct
    return _Reduce(_reconstruct, (np.ndarray, (0,), b"b"),
                   (1, array.shape, dtype, False, array.tobytes()))


def _dtype_pickle(spec, order):
    """``numpy.dtype(spec)`` then BUILD with the byte order ``order`` (str, or bytes as
    Python 2 wrote them)."""
    return _Reduce(np.dtype, (spec, False, True), (3, order, None, None, None, -1, -1, 0))


def test_a_cifar_batch_written_by_python_2_loads(tmp_path):
    """Python 2's ``str`` reads back as bytes: the dtype's byte order ``b'|'`` made the
    batch reader fail with a TypeError on the real CIFAR-10 files."""
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    data = np.arange(2 * 3072).astype(np.uint8).reshape(2, 3072)
    batch = {b"data": _py2_array(data, _dtype_pickle(b"u1", b"|")), b"labels": [3, 7],
             b"batch_label": b"testing batch 1 of 1", b"filenames": [b"a.png", b"b.png"]}
    with open(folder / "test_batch", "wb") as f:
        _Py2Pickler(f, protocol=2).dump(batch)
    ds = CIFAR10(tmp_path, train=False)
    assert len(ds) == 2 and ds[1][1] == 7
    np.testing.assert_array_equal(ds[1][0], data[1].reshape(3, 32, 32).transpose(1, 2, 0))


def test_a_shared_dtype_keeps_its_byte_order(tmp_path):
    """The pickle memoises a dtype before BUILD sets its byte order; the second array that
    refers to it got the native order (wrong values) when BUILD replaced the dtype."""
    big = _dtype_pickle("i4", ">")            # how NumPy pickles a big-endian int32
    arrays = {b"a": np.array([1, 2, 3], ">i4"), b"b": np.array([256, 512, 1024], ">i4")}
    with open(tmp_path / "batch", "wb") as f:
        _Py2Pickler(f, protocol=2).dump({k: _py2_array(a, big) for k, a in arrays.items()})
    loaded = load_batch(tmp_path / "batch")
    for key, array in arrays.items():
        assert loaded[key].tolist() == array.tolist(), key


def test_a_cifar_batch_cannot_make_the_reader_zero_fill_gigabytes(tmp_path):
    """A 20-byte pickle whose BYTEARRAY8 declares 1 GiB: the stock opcode allocated and
    zeroed the gigabyte before reading a byte."""
    (tmp_path / "batch").write_bytes(b"\x80\x05\x96" + (1 << 30).to_bytes(8, "little")
                                     + b"abc.")
    tracemalloc.start()
    try:
        with pytest.raises(CIFARFileError, match=r"batch is not a CIFAR-10 batch"):
            load_batch(tmp_path / "batch")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
