"""Dataset files from strangers (issue 32): every reader refuses a hostile file with its
format's one error type, naming the file, before it maps, allocates or inflates what the
file declares; nothing outside the file (or the archive's destination) is read or written.
"""
import codecs
import gzip
import io
import os
import pickle
import stat
import struct
import tarfile
import zipfile

import numpy as np
import pytest

from lezero.data import DataLoader
from lezero.data.datasets import (CIFAR10, ArchiveError, CIFARFileError, HDF5Dataset,
                                  HDF5FileError, IdxFileError, ImageFileError, ImageFolder,
                                  MemmapDataset, NpyDataset, NpyFileError, NpzDataset,
                                  NpzFileError, RawFileError, download_url, extract_tar,
                                  load_corpus, load_image, read_idx)
from lezero.data.datasets.errors import DataFileError
from lezero.utils.files import FileFormatError

pytestmark = pytest.mark.timeout(60)


def npy_bytes(header, body=b"", version=1):
    """A .npy file with a hand-written header dict (padded as np.save pads it)."""
    text = header.encode("latin1")
    fmt = "<H" if version == 1 else "<I"
    pad = 64 - (10 + (2 if version == 2 else 0) + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, len(text)) + text + body


def test_every_data_file_error_is_a_value_error_of_the_loader_family():
    for cls in (NpyFileError, NpzFileError, IdxFileError, HDF5FileError, ImageFileError,
                ArchiveError, CIFARFileError):
        assert issubclass(cls, DataFileError) and issubclass(cls, FileFormatError)
        assert issubclass(cls, ValueError)
    assert issubclass(ArchiveError, OSError)
    assert issubclass(CIFARFileError, pickle.UnpicklingError)


# ----- .npy -----------------------------------------------------------------------------------

def test_npy_header_declaring_more_than_the_file_holds(tmp_path):
    path = tmp_path / "big.npy"
    path.write_bytes(npy_bytes("{'descr': '<f8', 'fortran_order': False, "
                               "'shape': (1000000000, 1000), }", b"\0" * 64))
    with pytest.raises(NpyFileError, match=r"big\.npy: the header declares shape "
                                           r"\(1000000000, 1000\) of float64"):
        NpyDataset(path)


def test_npy_header_length_field_of_4_gb_is_refused_before_reading(tmp_path):
    path = tmp_path / "hdr.npy"
    path.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{}")
    with pytest.raises(NpyFileError, match=r"hdr\.npy: \.npy header length 4294967280"):
        NpyDataset(path)


def test_npy_object_arrays_and_scalars_are_refused(tmp_path):
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(NpyFileError, match=r"obj\.npy: dtype object is refused"):
        NpyDataset(obj)
    scalar = tmp_path / "scalar.npy"
    np.save(scalar, np.float32(3))
    with pytest.raises(NpyFileError, match=r"scalar\.npy is a scalar"):
        NpyDataset(scalar)


def test_npy_header_that_is_not_a_literal_dict(tmp_path):
    for k, header in enumerate(["__import__('os').system('echo x')", "[1, 2]",
                                "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
                                "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
                                "{'descr': 'xyz', 'fortran_order': False, 'shape': (2,)}",
                                "{'descr': ('<f4', (3,)), 'fortran_order': False, "
                                "'shape': (2,)}",
                                "(" * 500 + ")" * 500]):
        path = tmp_path / f"h{k}.npy"
        path.write_bytes(npy_bytes(header, b"\0" * 16))
        with pytest.raises(NpyFileError, match=rf"h{k}\.npy"):
            NpyDataset(path)


def test_npy_rows_of_zero_bytes_cannot_declare_a_billion_samples(tmp_path):
    path = tmp_path / "empty_rows.npy"
    path.write_bytes(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (1000000000, 0), }"))
    with pytest.raises(NpyFileError, match=r"declares 1000000000 samples in 128 bytes"):
        NpyDataset(path)


def test_npy_fortran_order_and_big_endian_files_still_load(tmp_path):
    a = np.asfortranarray(np.arange(12, dtype=">i4").reshape(4, 3))
    np.save(tmp_path / "f.npy", a)
    ds = NpyDataset(tmp_path / "f.npy")
    np.testing.assert_array_equal(np.stack([ds[i] for i in range(4)]), a)


def test_indices_are_checked_before_a_cast_could_wrap(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(10))
    ds = NpyDataset(tmp_path / "a.npy")
    with pytest.raises(IndexError, match=r"NpyDataset: indices out of range for 10 samples"):
        ds.__getitems__(np.array([2**64 - 1], dtype=np.uint64))    # would wrap to -1
    with pytest.raises(TypeError, match=r"indices must be a flat sequence of integers"):
        ds.__getitems__([1.7])                                    # would truncate to 1
    with pytest.raises(TypeError, match=r"NpyDataset: index must be an integer, got float"):
        ds[1.5]
    assert [int(x) for x in ds.__getitems__([9, -1, 0])] == [9, 9, 0]


def test_memmap_dataset_refuses_object_dtypes_and_negative_shapes(tmp_path):
    path = tmp_path / "raw.bin"
    path.write_bytes(b"\0" * 64)
    with pytest.raises(TypeError, match=r"MemmapDataset: dtype object cannot be read"):
        MemmapDataset(path, object, (8,))
    with pytest.raises(ValueError, match=r"shape must be non-negative"):
        MemmapDataset(path, np.uint8, (-8,))
    with pytest.raises(TypeError, match=r"shape must be integers"):
        MemmapDataset(path, np.uint8, (2.5,))
    with pytest.raises(RawFileError, match=r"raw\.bin has 64 bytes, shape \(9, 8\)"):
        MemmapDataset(path, np.uint8, (9, 8))
    assert len(MemmapDataset(path, np.uint8, 64)) == 64


# ----- .npz -----------------------------------------------------------------------------------

def write_zip(path, members, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_npz_member_header_declaring_a_terabyte_is_refused_without_allocating(tmp_path):
    path = tmp_path / "tb.npz"
    write_zip(path, {"x.npy": npy_bytes("{'descr': '<f8', 'fortran_order': False, "
                                        "'shape': (1000000000000,), }", b"\0" * 80)})
    with pytest.raises(NpzFileError, match=r"tb\.npz: member x\.npy: the header declares "
                                           r"shape \(1000000000000,\)"):
        NpzDataset(path, "x")


def test_npz_inflation_is_bounded_and_can_be_raised(tmp_path):
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, x=np.zeros((400, 100_000), np.uint8))     # 40 MB of zeros
    assert os.path.getsize(path) < 100_000
    with pytest.raises(NpzFileError, match=r"bomb\.npz: member 'x\.npy' would expand to "
                                           r"40000\d+ bytes.*max_inflation"):
        NpzDataset(path, "x")
    ds = NpzDataset(path, "x", max_inflation=10_000)
    assert len(ds) == 400 and ds[3].shape == (100_000,)


def test_npz_object_members_and_non_archives_are_refused(tmp_path):
    obj = tmp_path / "obj.npz"
    np.savez(obj, x=np.array([print], dtype=object))
    with pytest.raises(NpzFileError, match=r"obj\.npz: member x\.npy: dtype object"):
        NpzDataset(obj, "x")
    notzip = tmp_path / "pickle.npz"
    notzip.write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(NpzFileError, match=r"pickle\.npz is not a readable \.npz archive"):
        NpzDataset(notzip, "x")
    with pytest.raises(KeyError, match=r"obj\.npz has no array 'y'; it has \['x'\]"):
        NpzDataset(obj, "y")


def test_npz_with_a_corrupted_member_is_refused(tmp_path):
    path = tmp_path / "crc.npz"
    np.savez(path, x=np.arange(1000, dtype=np.int64))
    raw = bytearray(path.read_bytes())
    raw[500] ^= 0xFF                            # inside x.npy's stored bytes
    path.write_bytes(bytes(raw))
    with pytest.raises(NpzFileError, match=r"crc\.npz"):
        NpzDataset(path, "x")


# ----- IDX ------------------------------------------------------------------------------------

def test_idx_with_huge_dimensions_in_20_bytes_is_refused(tmp_path):
    path = tmp_path / "huge.idx"
    path.write_bytes(b"\x00\x00\x08\x03" + struct.pack(">3I", 60000, 60000, 60000) + b"x")
    with pytest.raises(IdxFileError, match=r"huge\.idx should hold 216000000000000 data "
                                           r"bytes for shape \(60000, 60000, 60000\), "
                                           r"found 1"):
        read_idx(path)


def test_idx_dimensions_whose_product_overflows_int64(tmp_path):
    path = tmp_path / "wrap.idx"
    path.write_bytes(b"\x00\x00\x0e\x04" + struct.pack(">4I", *[2**32 - 1] * 4) + b"\0" * 8)
    with pytest.raises(IdxFileError, match=r"wrap\.idx should hold \d{30,} data bytes"):
        read_idx(path)


def test_gzipped_idx_inflation_is_bounded(tmp_path):
    path = tmp_path / "bomb-idx.gz"
    path.write_bytes(gzip.compress(b"\x00\x00\x08\x01" + struct.pack(">I", 40_000_000)
                                   + bytes(40_000_000)))
    with pytest.raises(IdxFileError, match=r"bomb-idx\.gz: shape \(40000000,\) of uint8 "
                                           r"would expand to 40000000 bytes"):
        read_idx(path)
    assert read_idx(path, max_inflation=10_000).shape == (40_000_000,)


def test_idx_corrupt_gzip_names_the_file(tmp_path):
    path = tmp_path / "bad.idx.gz"
    good = gzip.compress(b"\x00\x00\x08\x01" + struct.pack(">I", 100) + bytes(range(100)))
    path.write_bytes(good[:-8] + b"\0\0\0\0" + good[-4:])       # a wrong CRC-32
    with pytest.raises(IdxFileError, match=r"bad\.idx\.gz cannot be read"):
        read_idx(path)


# ----- HDF5 -----------------------------------------------------------------------------------

h5py = pytest.importorskip("h5py")


def test_hdf5_external_storage_cannot_read_a_local_file(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"root:x:0:0:the password file\n" * 4)
    path = tmp_path / "ext.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(4, 30), dtype="u1",
                         external=[(str(secret), 0, 120)])
    with pytest.raises(HDF5FileError, match=r"ext\.h5: 'x' keeps its data in external "
                                            r"files .*secret\.txt.*refused"):
        HDF5Dataset(path, "x")


def test_hdf5_external_links_and_virtual_datasets_are_refused(tmp_path):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["data"] = np.arange(10)
        f["grp/data"] = np.arange(10)
    path = tmp_path / "links.h5"
    with h5py.File(path, "w") as f:
        f["ext"] = h5py.ExternalLink(str(other), "/data")
        f["extgrp"] = h5py.ExternalLink(str(other), "/grp")
        f["inside"] = np.arange(10)
        f["soft"] = h5py.SoftLink("/inside")
        layout = h5py.VirtualLayout(shape=(10,), dtype="i8")
        layout[:] = h5py.VirtualSource(str(other), "data", shape=(10,))
        f.create_virtual_dataset("virtual", layout)
    with pytest.raises(HDF5FileError, match=r"links\.h5: 'ext' goes through an external "
                                            r"link to .*other\.h5"):
        HDF5Dataset(path, "ext")
    with pytest.raises(HDF5FileError, match=r"'extgrp/data' goes through an external link"):
        HDF5Dataset(path, "extgrp/data")
    with pytest.raises(HDF5FileError, match=r"'virtual' is a virtual dataset"):
        HDF5Dataset(path, "virtual")
    assert HDF5Dataset(path, "soft")[3] == 3          # a link inside the file is fine
    with h5py.File(path, "a") as f:
        f["soft_out"] = h5py.SoftLink("/extgrp/data")   # inside, then out through "extgrp"
    with pytest.raises(HDF5FileError, match=r"'soft_out' leads to another file .*other\.h5"):
        HDF5Dataset(path, "soft_out")


def test_hdf5_fill_value_datasets_declaring_terabytes_are_refused(tmp_path):
    path = tmp_path / "fill.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(10**6, 10**6), dtype="f8", chunks=(1, 1000))
        f.create_dataset("y", shape=(10**12,), dtype="i8", chunks=(1000,))
        f["small"] = np.arange(4.0)
    with pytest.raises(HDF5FileError, match=r"fill\.h5: dataset 'x' .* would expand to "
                                            r"8000000000000 bytes"):
        HDF5Dataset(path, "x")
    with pytest.raises(HDF5FileError, match=r"dataset 'y' .* would expand to"):
        HDF5Dataset(path, "small", target_key="y")
    with h5py.File(path, "a") as f:       # one row, but chunks of 800 MB to decompress
        f.create_dataset("c", shape=(1,), maxshape=(None,), chunks=(10**8,), dtype="f8")
    with pytest.raises(HDF5FileError, match=r"chunks \(100000000,\)\) would expand to "
                                            r"800000000 bytes"):
        HDF5Dataset(path, "c")


def test_hdf5_objects_groups_and_non_hdf5_files_are_refused(tmp_path):
    path = tmp_path / "odd.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("names", data=np.array(["a", "bb"], dtype=h5py.string_dtype()))
        f.create_group("grp")
    with pytest.raises(HDF5FileError, match=r"'names' has dtype object"):
        HDF5Dataset(path, "names")
    with pytest.raises(HDF5FileError, match=r"'grp' is a Group, not a dataset"):
        HDF5Dataset(path, "grp")
    with pytest.raises(KeyError, match=r"odd\.h5 has no dataset 'nope'"):
        HDF5Dataset(path, "nope")
    fake = tmp_path / "fake.h5"
    fake.write_bytes(b"not an hdf5 file at all" * 10)
    with pytest.raises(HDF5FileError, match=r"fake\.h5 is not a readable HDF5 file"):
        HDF5Dataset(fake, "x")


# ----- CIFAR-10 batches (pickles) -------------------------------------------------------------

class _Reduce:
    """Pickles as ``func(*args)`` then BUILD ``state`` when a state is given."""

    def __init__(self, func, args, state=None):
        self.value = (func, args) if state is None else (func, args, state)

    def __reduce__(self):
        return self.value


def cifar_root(tmp_path, payload):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir(exist_ok=True)
    (folder / "test_batch").write_bytes(pickle.dumps(payload, protocol=2))
    return tmp_path


def good_batch(n=2):
    return {b"data": np.arange(n * 3072, dtype=np.uint64).astype(np.uint8).reshape(n, 3072),
            b"labels": list(range(n))}


def test_cifar_dtype_build_cannot_add_fields_past_the_item_size(tmp_path):
    state = (3, "|", None, ("a",), {"a": (np.dtype("u1"), 100000)}, 8, 1, 0)
    evil = _Reduce(np.dtype, ("V8", False, True), state)     # numpy.dtype, then BUILD
    root = cifar_root(tmp_path, {b"data": evil, b"labels": [0]})
    with pytest.raises(CIFARFileError, match=r"test_batch is not a CIFAR-10 batch .*"
                                             r"dtype.*not a plain numeric dtype"):
        CIFAR10(root, train=False)
    evil_state = _Reduce(np.dtype, ("u1", False, True), state)   # a plain dtype, bad state
    with pytest.raises(CIFARFileError, match=r"unexpected dtype state"):
        CIFAR10(cifar_root(tmp_path, {b"data": evil_state, b"labels": [0]}), train=False)


def test_cifar_allocation_bombs_are_refused(tmp_path):
    for payload, what in [
            ({b"data": _Reduce(bytearray, (10**13,))}, "bytearray"),
            ({b"data": _Reduce(np.zeros(1).__reduce__()[0],          # _reconstruct
                               (np.ndarray, (10**13,), b"b"))}, "placeholder"),
            ({b"data": _Reduce(np.ndarray, ((10**13,),))}, "not callable"),
            ({b"data": _Reduce(codecs.encode, ("x", "rot13"))}, "'rot13' is not allowed")]:
        with pytest.raises(CIFARFileError, match=what):
            CIFAR10(cifar_root(tmp_path, payload), train=False)


def test_cifar_batches_of_the_wrong_shape_or_labels_are_refused(tmp_path):
    shared = []
    for _ in range(40):
        shared = [shared, shared]                        # 2**40 leaves, 80 objects
    bad = [({b"data": shared, b"labels": [0]}, "'data' should be a uint8 array"),
           ({b"data": np.zeros((2, 3072), np.uint8), b"labels": shared},
            "'labels' should be 2 ints in 0..9"),
           ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, "'labels'"),
           ([1, 2, 3], "holds a list, not a batch dict")]
    for payload, what in bad:
        with pytest.raises(CIFARFileError, match=what):
            CIFAR10(cifar_root(tmp_path, payload), train=False)
    ds = CIFAR10(cifar_root(tmp_path, good_batch()), train=False)
    assert len(ds) == 2 and ds[1][0].shape == (32, 32, 3) and ds[1][1] == 1


# ----- tar archives ---------------------------------------------------------------------------

def make_tar(path, entries, mode="w"):
    """``entries``: (name, type, data or link target)."""
    with tarfile.open(path, mode) as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                    info.linkname = data
                if kind == tarfile.CHRTYPE:
                    info.devmajor, info.devminor = 1, 3
                tar.addfile(info)


@pytest.mark.parametrize("entry, kind", [
    (("null", tarfile.CHRTYPE, None), "special file"),
    (("pipe", tarfile.FIFOTYPE, None), "special file"),
    (("link", tarfile.SYMTYPE, "/etc/passwd"), "link"),
    (("hard", tarfile.LNKTYPE, "/etc/passwd"), "link"),
    (("/abs.txt", tarfile.REGTYPE, b"x"), "file"),
    (("a/../../up.txt", tarfile.REGTYPE, b"x"), "file")])
def test_extract_tar_refuses_links_devices_and_escapes(tmp_path, entry, kind):
    archive = tmp_path / "evil.tar"
    make_tar(archive, [("ok.txt", tarfile.REGTYPE, b"fine"), entry])
    with pytest.raises(ArchiveError, match=rf"unsafe member '{entry[0]}' \({kind}\) in "
                                           rf".*evil\.tar"):
        extract_tar(archive, tmp_path / "dest")
    assert os.listdir(tmp_path / "dest") == []         # nothing at all was extracted
    assert not (tmp_path / "up.txt").exists()


def test_extract_tar_bounds_inflation_members_and_reports_non_archives(tmp_path):
    bomb = tmp_path / "bomb.tar.gz"
    make_tar(bomb, [("zeros", tarfile.REGTYPE, bytes(30_000_000))], mode="w:gz")
    with pytest.raises(ArchiveError, match=r"bomb\.tar\.gz: member 'zeros' would expand"):
        extract_tar(bomb, tmp_path / "d1")
    many = tmp_path / "many.tar"
    make_tar(many, [(f"f{i}", tarfile.REGTYPE, b"") for i in range(11)])
    with pytest.raises(ArchiveError, match=r"many\.tar has more than 10 members"):
        extract_tar(many, tmp_path / "d2", max_members=10)
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"\x89PNG not a tar" * 100)
    with pytest.raises(ArchiveError, match=r"cannot extract .*junk\.tar"):
        extract_tar(junk, tmp_path / "d3")
    extract_tar(bomb, tmp_path / "d4", max_inflation=100_000)
    assert os.path.getsize(tmp_path / "d4" / "zeros") == 30_000_000


def test_extract_tar_accepts_a_dot_folder(tmp_path):
    archive = tmp_path / "ok.tar"
    make_tar(archive, [("./", tarfile.DIRTYPE, None), ("./a/b.txt", tarfile.REGTYPE, b"hi")])
    extract_tar(archive, tmp_path / "dest")
    path = tmp_path / "dest" / "a" / "b.txt"
    assert path.read_bytes() == b"hi" and stat.S_ISREG(os.lstat(path).st_mode)


def test_download_url_refuses_a_file_name_that_leaves_root(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"x")
    for name in ("../escape.bin", "a/b.bin", "..", "."):
        with pytest.raises(ValueError, match="filename must be a plain file name"):
            download_url(src.as_uri(), tmp_path / "root", filename=name)
    assert not (tmp_path / "escape.bin").exists()


def test_load_corpus_takes_a_name_not_a_path():
    with pytest.raises(FileNotFoundError, match="no corpus '../datasets/tiny_corpus'"):
        load_corpus("../datasets/tiny_corpus")


# ----- images ---------------------------------------------------------------------------------

def png_header_only(width, height):
    def chunk(kind, data):
        import zlib
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_load_image_refuses_pixel_bombs_before_decoding(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(10_000, 10_000))     # 100 M pixels: Pillow only warns
    with pytest.raises(ImageFileError, match=r"bomb\.png declares 10000x10000 pixels, "
                                             r"more than PIL\.Image\.MAX_IMAGE_PIXELS"):
        load_image(path)


def test_load_image_errors_name_the_file(tmp_path):
    from PIL import Image
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"definitely not an image")
    with pytest.raises(ImageFileError, match=r"cannot decode .*junk\.png"):
        load_image(junk)
    good = tmp_path / "good.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(good)
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
    with pytest.raises(ImageFileError, match=r"cut\.png"):
        load_image(cut)
    with pytest.raises(FileNotFoundError):
        load_image(tmp_path / "missing.png")


@pytest.mark.timeout(20)
def test_image_folder_with_symlink_loops_finishes(tmp_path):
    from PIL import Image
    (tmp_path / "cat").mkdir()
    Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(tmp_path / "cat" / "a.png")
    for k in range(3):                # 3 links up per folder: 3**40 paths without a guard
        os.symlink("..", tmp_path / "cat" / f"up{k}")
        os.symlink(".", tmp_path / "cat" / f"here{k}")
    ds = ImageFolder(tmp_path)
    assert [os.path.basename(p) for p, _ in ds.samples] == ["a.png"]


# ----- through the loader ----------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_a_file_error_in_a_worker_names_the_file_and_the_batch(tmp_path):
    path = tmp_path / "corrupt.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(64.0).reshape(16, 4), chunks=(4, 4),
                         compression="gzip")
    ds = HDF5Dataset(path, "x")
    raw = bytearray(path.read_bytes())
    with h5py.File(path, "r") as f:                 # overwrite the third chunk's bytes
        offset, size = f["x"].id.get_chunk_info(2).byte_offset, f["x"].id.get_chunk_info(2).size
    raw[offset:offset + size] = b"\xff" * size
    path.write_bytes(bytes(raw))
    it = iter(DataLoader(ds, batch_size=4, num_workers=1, seed=0))
    assert next(it).shape == (4, 4) and next(it).shape == (4, 4)
    with pytest.raises(HDF5FileError, match=r"cannot read .*corrupt\.h5") as info:
        next(it)
    assert "while building batch 2 (indices [8, 9, 10, 11])" in str(info.value)
    assert next(it).shape == (4, 4)


# ----- the SpokenDigits cache -----------------------------------------------------------------

def test_a_tampered_spoken_digits_cache_is_refused(tmp_path):
    from lezero.data.datasets import SpokenDigits, spoken_digits
    folder = tmp_path / "spoken_digits"
    folder.mkdir()
    path = folder / f"train-2-2-0-v{spoken_digits._VERSION}.npz"

    def cache(offsets, pcm_len=10):
        np.savez(path, pcm=np.zeros(pcm_len, np.int16), offsets=np.array(offsets),
                 labels=np.zeros((2, 2), np.int64), voices=np.array(["a", "b"]))

    cache([0, 4, 10])
    ds = SpokenDigits(train=True, n=2, max_digits=2, seed=0, root=tmp_path)
    assert [len(w) for w, _ in (ds[0], ds[1])] == [4, 6]
    for bad in ([0, 4, 10**9], [0, 8, 4], [5, 6, 10]):
        cache(bad)                  # offsets past the samples, backwards, not from 0
        with pytest.raises(NpzFileError, match=r"train-2-2-0-v\d+\.npz is not a consistent "
                                               r"cache"):
            SpokenDigits(train=True, n=2, max_digits=2, seed=0, root=tmp_path)
    path.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(NpzFileError, match=r"is not a readable \.npz archive"):
        SpokenDigits(train=True, n=2, max_digits=2, seed=0, root=tmp_path)
